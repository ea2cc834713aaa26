// Package kmsg reads kernel logs and recognises the lines gpusplit's doctor looks for.
//
// Scan reads the kernel log in any of the forms it is usually found in: /dev/kmsg records,
// dmesg output, journal or syslog text, or bare messages, and hands each message to a
// callback without holding the log in memory. The Parse and Is functions each recognise one
// kind of message (a BAR that could not be assigned, an IOMMU fault, the nvidia driver's
// complaints, …) and pull out its fields.
package kmsg

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

const (
	// MaxLine is the longest input line Scan looks at; the rest of a longer line is
	// skipped.
	MaxLine = 64 << 10
	// MaxRecord is the longest message Scan hands on; the lines of a multi-line message
	// that would make it longer are dropped.
	MaxRecord = 256 << 10
)

// Record is one kernel log message.
type Record struct {
	Priority int           // syslog priority 0-7 (facility stripped); -1 when unknown
	Seq      uint64        // /dev/kmsg sequence number; 0 when unknown
	Time     time.Duration // since boot; -1 when unknown
	Message  string        // the text; the lines of a multi-line message joined with "\n"
	// Kernel says the line had a kernel log's own form: a /dev/kmsg head, a dmesg
	// stamp or priority, a journal or syslog "kernel:" line. A bare line, taken as it
	// is, may be a kernel message (journalctl -o cat) or anything else.
	Kernel bool
}

// Scan reads a kernel log and calls fn for each record until fn returns false. It accepts,
// line by line, so that one input may mix them:
//
//   - /dev/kmsg records, "prio,seq,usec,flags;message", whose \xHH escapes are undone (a
//     multi-line message is one record with \x0a inside). The dictionary lines that follow
//     a record, starting with a space (" SUBSYSTEM=pci"), are skipped.
//   - dmesg output, "[   12.345678] message". Lines indented with spaces that follow it are
//     the further lines of the same message, as dmesg prints a multi-line message, unless
//     they start with a stamp of their own (a log pasted indented). The
//     human-readable ("[Thu Oct 20 05:10:45 2022]"), delta ("[ +0.000398]") and ISO 8601
//     stamps are accepted as well, with Time -1; so are a leading "<6>" (dmesg -r) and
//     "kern  :info  : " (dmesg -x), which give Priority.
//   - journal or syslog text, "Sep 21 09:59:59 host kernel: message" (or with an ISO 8601
//     stamp), with further lines indented as for dmesg. Everything up to "kernel: " is
//     dropped, and a "[   12.345678] " after it gives Time. rsyslog's "#012" and "#011"
//     escapes become a newline and a tab. Lines of other programs ("host systemd[1]: …")
//     are not kernel messages and are skipped, and so are journalctl's "-- Boot … --"
//     markers.
//   - anything else, taken as it is, less leading blanks: one line, one record.
//
// Blank lines are skipped. Trailing "\r" is dropped. A line longer than MaxLine is cut to
// MaxLine bytes and a record that would grow past MaxRecord is cut there, so memory stays
// bounded whatever the input. The error is the reader's, never io.EOF.
func Scan(r io.Reader, fn func(Record) bool) error {
	s := &scanner{br: bufio.NewReaderSize(r, MaxLine), fn: fn}
	return s.run()
}

// kinds of the last record, which decide what an indented line that follows it is.
const (
	afterNone   = iota // nothing, or a one-line record: an indented line is a new record
	afterKmsg          // a /dev/kmsg record: indented lines are its dictionary
	afterSkip          // a skipped line: indented lines belong to it and are skipped too
	afterDmesg         // a dmesg or syslog record, still open: indented lines continue it
	afterSyslog        // as afterDmesg, with rsyslog escapes to undo
)

type scanner struct {
	br      *bufio.Reader
	fn      func(Record) bool
	long    []byte // holds a line cut at MaxLine while the rest of it is skipped
	after   int
	rec     Record // the open record (after == afterDmesg or afterSyslog), less Message
	msg     []byte // its message
	stopped bool
}

func (s *scanner) run() error {
	for !s.stopped {
		line, err := s.readLine()
		if len(line) > 0 {
			s.line(line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			s.flush()
			return err
		}
	}
	s.flush()
	return nil
}

// readLine returns the next line without its newline, cut to MaxLine bytes. The slice is
// valid until the next call.
func (s *scanner) readLine() ([]byte, error) {
	line, err := s.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		s.long = append(s.long[:0], line...)
		for err == bufio.ErrBufferFull {
			_, err = s.br.ReadSlice('\n')
		}
		line = s.long
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	return line, err
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func trimLeftBlanks(b []byte) []byte {
	for len(b) > 0 && isBlank(b[0]) {
		b = b[1:]
	}
	return b
}

func (s *scanner) line(line []byte) {
	text := trimLeftBlanks(line)
	if len(text) == 0 {
		return
	}
	if line[0] == ' ' && !stamped(text) {
		switch s.after {
		case afterKmsg, afterSkip:
			return
		case afterDmesg, afterSyslog:
			if s.after == afterSyslog {
				text = unescapeSyslog(text)
			}
			s.appendLine(text)
			return
		}
	}
	s.flush()
	if s.stopped {
		return
	}
	if bytes.HasPrefix(text, []byte("-- ")) && bytes.HasSuffix(text, []byte(" --")) {
		s.after = afterSkip
		return
	}
	if s.kmsgRecord(text) {
		return
	}

	rec := Record{Priority: -1, Time: -1}
	if p, rest, ok := anglePriority(text); ok {
		rec.Priority, rec.Kernel, text = p, true, rest
	} else if p, rest, ok := decodedPriority(text); ok {
		rec.Priority, rec.Kernel, text = p, true, rest
	}
	if rest, ok := talosPrefix(text); ok {
		rec.Kernel = true
		s.open(rec, rest, afterDmesg)
		return
	}
	if rest, ok := cutKernelTags(text); ok {
		rec.Kernel = true
		// "kernel: " with no stamp before it: a journal or syslog paste with its
		// stamps cut off, maybe with the dmesg stamp after it.
		text = rest
		if t, rest, ok := dmesgStamp(text); ok {
			rec.Time, text = t, rest
		}
		s.open(rec, text, afterDmesg)
		return
	}
	if t, rest, ok := dmesgStamp(text); ok {
		rec.Time, rec.Kernel, text = t, true, stripKernelTag(rest)
		s.open(rec, text, afterDmesg)
		return
	}
	hasStamp := false
	if rest, dmesgISO, ok := isoStamp(text); ok {
		if dmesgISO {
			rec.Kernel = true
			s.open(rec, rest, afterDmesg)
			return
		}
		text, hasStamp = rest, true
	} else if rest, ok := syslogStamp(text); ok {
		text, hasStamp = rest, true
	}
	if hasStamp {
		if msg, ok := syslogKernel(text); ok {
			s.openSyslog(rec, msg)
			return
		}
		if syslogOther(text) {
			s.after = afterSkip
			return
		}
		// A stamp and no tag: take the rest as the message.
		s.open(rec, text, afterDmesg)
		return
	}
	s.msg = append(s.msg[:0], text...)
	s.rec = rec
	s.emit()
	s.after = afterNone
}

// stamped reports whether an indented line starts with a stamp of its own: it is then a
// record of its own, from a log that was pasted indented, not a further line or a
// dictionary entry.
func stamped(text []byte) bool {
	if _, _, ok := dmesgStamp(text); ok {
		return true
	}
	if _, ok := syslogStamp(text); ok {
		return true
	}
	_, _, ok := isoStamp(text)
	return ok
}

// openSyslog opens a record from the message part of a syslog kernel line, which may
// start with the kernel's own "[   12.345678] " stamp.
func (s *scanner) openSyslog(rec Record, msg []byte) {
	rec.Kernel = true
	if t, rest, ok := dmesgStamp(msg); ok {
		rec.Time, msg = t, rest
	}
	s.open(rec, unescapeSyslog(msg), afterSyslog)
}

func (s *scanner) open(rec Record, text []byte, after int) {
	s.rec = rec
	s.msg = append(s.msg[:0], text...)
	s.after = after
}

// appendLine adds a further line to the open record, as far as MaxRecord allows.
func (s *scanner) appendLine(text []byte) {
	room := MaxRecord - len(s.msg) - 1
	if room <= 0 {
		return
	}
	if len(text) > room {
		text = cutRunes(text, room)
	}
	s.msg = append(s.msg, '\n')
	s.msg = append(s.msg, text...)
}

// cutRunes cuts b to at most n bytes, not inside a UTF-8 sequence where it can help it.
func cutRunes(b []byte, n int) []byte {
	if n >= len(b) {
		return b
	}
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return b[:i]
		}
	}
	return b[:n]
}

// flush hands on the open record, if any.
func (s *scanner) flush() {
	if s.after == afterDmesg || s.after == afterSyslog {
		s.emit()
	}
	s.after = afterNone
}

func (s *scanner) emit() {
	if s.stopped {
		return
	}
	s.rec.Message = string(s.msg)
	if !s.fn(s.rec) {
		s.stopped = true
	}
	s.rec = Record{}
}

// kmsgRecord handles a /dev/kmsg record, "prio,seq,usec,flags[,…];message".
func (s *scanner) kmsgRecord(line []byte) bool {
	semi := bytes.IndexByte(line, ';')
	if semi < 0 || line[0] < '0' || line[0] > '9' {
		return false
	}
	head := line[:semi]
	fields := [3][]byte{}
	for i := range fields {
		comma := bytes.IndexByte(head, ',')
		if comma < 0 {
			if i < 2 {
				return false
			}
			comma = len(head)
		}
		fields[i], head = head[:comma], head[min(comma+1, len(head)):]
	}
	prio, err1 := strconv.ParseUint(string(fields[0]), 10, 32)
	seq, err2 := strconv.ParseUint(string(fields[1]), 10, 64)
	usec, err3 := strconv.ParseUint(string(fields[2]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return false
	}
	rec := Record{Priority: int(prio & 7), Seq: seq, Time: -1, Kernel: true}
	if usec <= uint64(1<<63-1)/uint64(time.Microsecond) {
		rec.Time = time.Duration(usec) * time.Microsecond
	}
	s.msg = unescapeKmsg(s.msg[:0], line[semi+1:])
	s.rec = rec
	s.emit()
	s.after = afterKmsg
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unescapeKmsg appends src to dst with its \xHH escapes undone.
func unescapeKmsg(dst, src []byte) []byte {
	for {
		i := bytes.Index(src, []byte(`\x`))
		if i < 0 || i+4 > len(src) {
			return append(dst, src...)
		}
		hi, ok1 := unhex(src[i+2])
		lo, ok2 := unhex(src[i+3])
		if !ok1 || !ok2 {
			dst = append(dst, src[:i+2]...)
			src = src[i+2:]
			continue
		}
		dst = append(dst, src[:i]...)
		dst = append(dst, hi<<4|lo)
		src = src[i+4:]
	}
}

// unescapeSyslog undoes rsyslog's escapes of newline (#012) and tab (#011). It may
// return b itself, rewritten in place: the result is never longer.
func unescapeSyslog(b []byte) []byte {
	if bytes.IndexByte(b, '#') < 0 {
		return b
	}
	out := b[:0]
	for i := 0; i < len(b); i++ {
		if b[i] == '#' && i+3 < len(b) && b[i+1] == '0' && b[i+2] == '1' && (b[i+3] == '2' || b[i+3] == '1') {
			if b[i+3] == '2' {
				out = append(out, '\n')
			} else {
				out = append(out, '\t')
			}
			i += 3
			continue
		}
		out = append(out, b[i])
	}
	return out
}

// anglePriority takes a leading "<6>" (dmesg -r, /proc/kmsg).
func anglePriority(b []byte) (int, []byte, bool) {
	if len(b) < 3 || b[0] != '<' {
		return 0, b, false
	}
	end := bytes.IndexByte(b, '>')
	if end < 2 || end > 5 {
		return 0, b, false
	}
	n, err := strconv.ParseUint(string(b[1:end]), 10, 16)
	if err != nil {
		return 0, b, false
	}
	return int(n & 7), b[end+1:], true
}

var levelNames = []string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

// facilityNames are syslog's facilities, as dmesg -x prints them.
var facilityNames = map[string]bool{
	"kern": true, "user": true, "mail": true, "daemon": true, "auth": true, "syslog": true,
	"lpr": true, "news": true, "uucp": true, "cron": true, "authpriv": true, "ftp": true,
	"res0": true, "res1": true, "res2": true, "res3": true,
	"local0": true, "local1": true, "local2": true, "local3": true,
	"local4": true, "local5": true, "local6": true, "local7": true,
}

func isFacility(name []byte) bool { return facilityNames[string(name)] }

// decodedPriority takes dmesg -x's "kern  :info  : ".
func decodedPriority(b []byte) (int, []byte, bool) {
	c1 := bytes.IndexByte(b, ':')
	if c1 < 3 || c1 > 9 {
		return 0, b, false
	}
	if !isFacility(bytes.TrimRight(b[:c1], " ")) {
		return 0, b, false
	}
	rest := b[c1+1:]
	c2 := bytes.Index(rest, []byte(": "))
	if c2 < 3 || c2 > 7 {
		return 0, b, false
	}
	level := string(bytes.TrimRight(rest[:c2], " "))
	for i, name := range levelNames {
		if level == name {
			return i, rest[c2+2:], true
		}
	}
	return 0, b, false
}

// dmesgStamp takes a leading "[   12.345678] " and its variants. Time is -1 for stamps that
// are not seconds since boot.
func dmesgStamp(b []byte) (time.Duration, []byte, bool) {
	if len(b) < 3 || b[0] != '[' {
		return 0, b, false
	}
	end := bytes.IndexByte(b, ']')
	if end < 0 || end > 40 {
		return 0, b, false
	}
	inner := bytes.TrimSpace(b[1:end])
	rest := b[end+1:]
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	// dmesg -d adds the delta after the stamp: "[    0.000003 <    0.000002>]".
	if lt := bytes.IndexByte(inner, '<'); lt > 0 && inner[len(inner)-1] == '>' {
		if _, ok := parseSeconds(bytes.TrimSpace(inner[lt+1 : len(inner)-1])); ok {
			inner = bytes.TrimSpace(inner[:lt])
		}
	}
	if t, ok := parseSeconds(inner); ok {
		return t, rest, true
	}
	if len(inner) > 1 && inner[0] == '+' {
		if _, ok := parseSeconds(bytes.TrimSpace(inner[1:])); ok {
			return -1, rest, true
		}
	}
	if isCtimeStamp(inner) || isRelStamp(inner) {
		return -1, rest, true
	}
	return 0, b, false
}

// parseSeconds reads "12.345678" (or "12") as a duration.
func parseSeconds(b []byte) (time.Duration, bool) {
	intPart, frac, _ := bytes.Cut(b, []byte{'.'})
	if len(intPart) == 0 || len(intPart) > 10 || !allDigits(intPart) || len(frac) > 9 || !allDigits(frac) {
		return 0, false
	}
	sec, _ := strconv.ParseInt(string(intPart), 10, 64)
	d := time.Duration(sec) * time.Second
	var ns int64
	for i := range 9 {
		ns *= 10
		if i < len(frac) {
			ns += int64(frac[i] - '0')
		}
	}
	return d + time.Duration(ns), true
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isClock reports whether b is "hh:mm:ss" or, with short, "hh:mm".
func isClock(b []byte, short bool) bool {
	n := 8
	if short {
		n = 5
	}
	if len(b) != n {
		return false
	}
	for i, c := range b {
		if i%3 == 2 {
			if c != ':' {
				return false
			}
		} else if !isDigit(c) {
			return false
		}
	}
	return true
}

// isCtimeStamp reports whether b is dmesg -T's "Thu Oct 20 05:10:45 2022".
func isCtimeStamp(b []byte) bool {
	if len(b) != 24 {
		return false
	}
	return isUpper(b[0]) && isLower(b[1]) && isLower(b[2]) && b[3] == ' ' &&
		isUpper(b[4]) && isLower(b[5]) && isLower(b[6]) && b[7] == ' ' &&
		(b[8] == ' ' || isDigit(b[8])) && isDigit(b[9]) && b[10] == ' ' &&
		isClock(b[11:19], false) && b[19] == ' ' && allDigits(b[20:])
}

// isRelStamp reports whether b is dmesg -e's "Oct20 05:10".
func isRelStamp(b []byte) bool {
	return len(b) == 11 && isUpper(b[0]) && isLower(b[1]) && isLower(b[2]) &&
		isDigit(b[3]) && isDigit(b[4]) && b[5] == ' ' && isClock(b[6:], true)
}

// syslogStamp takes a leading "Sep 21 09:59:59 ".
func syslogStamp(b []byte) ([]byte, bool) {
	if len(b) < 16 || b[15] != ' ' {
		return b, false
	}
	if !(isUpper(b[0]) && isLower(b[1]) && isLower(b[2]) && b[3] == ' ' &&
		(b[4] == ' ' || isDigit(b[4])) && isDigit(b[5]) && b[6] == ' ' && isClock(b[7:15], false)) {
		return b, false
	}
	return b[16:], true
}

// isoStamp takes a leading ISO 8601 stamp: rsyslog's "2024-05-01T10:11:12.123456+02:00 ",
// journalctl -o short-iso's "2024-05-01T10:11:12+0200 ", or dmesg --time-format iso's
// "2024-05-01T10:11:12,123456+02:00 ", which alone has a comma and no host and tag after it.
func isoStamp(b []byte) (rest []byte, dmesgISO, ok bool) {
	if len(b) < 20 || !allDigits(b[0:4]) || b[4] != '-' || !allDigits(b[5:7]) || b[7] != '-' ||
		!allDigits(b[8:10]) || b[10] != 'T' || !isClock(b[11:19], false) {
		return b, false, false
	}
	sp := bytes.IndexByte(b[19:], ' ')
	if sp < 0 || sp > 20 {
		return b, false, false
	}
	for _, c := range b[19 : 19+sp] {
		switch {
		case c == ',':
			dmesgISO = true
		case isDigit(c) || c == '.' || c == '+' || c == '-' || c == ':' || c == 'Z':
		default:
			return b, false, false
		}
	}
	return b[19+sp+1:], dmesgISO, true
}

// cutKernelTags drops a leading "kernel: ", and any more after it: a journal pasted
// through another log reads "kernel: kernel: NVRM: …".
func cutKernelTags(b []byte) ([]byte, bool) {
	msg, ok := bytes.CutPrefix(b, []byte("kernel: "))
	if !ok {
		return b, false
	}
	for {
		rest, more := bytes.CutPrefix(msg, []byte("kernel: "))
		if !more {
			return msg, true
		}
		msg = rest
	}
}

// talosPrefix takes what talosctl dmesg puts before a message, the node, facility,
// level and an RFC 3339 stamp: "192.168.11.119: kern: warning: [2026-04-22T21:30:51.870495804Z]: ".
func talosPrefix(b []byte) ([]byte, bool) {
	node, rest, ok := bytes.Cut(b, []byte(": kern: "))
	if !ok || len(node) == 0 || len(node) > 64 || bytes.ContainsAny(node, " []") {
		return b, false
	}
	level, rest, ok := bytes.Cut(rest, []byte(": ["))
	if !ok || len(level) == 0 || len(level) > 8 || bytes.IndexByte(level, ' ') >= 0 {
		return b, false
	}
	stamp, msg, ok := bytes.Cut(rest, []byte("]: "))
	if !ok {
		return b, false
	}
	if _, _, ok := isoStamp(append(stamp[:len(stamp):len(stamp)], ' ')); !ok {
		return b, false
	}
	return msg, true
}

// syslogKernel takes "host kernel: " (or "kernel: ", with no host) after a syslog stamp.
func syslogKernel(b []byte) ([]byte, bool) {
	if msg, ok := cutKernelTags(b); ok {
		return msg, true
	}
	host, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok || len(host) == 0 {
		return b, false
	}
	if msg, ok := cutKernelTags(rest); ok {
		return msg, true
	}
	if bytes.Equal(rest, []byte("kernel:")) {
		return nil, true
	}
	return b, false
}

// syslogOther recognises "host tag[pid]: " after a syslog stamp: a line of some other
// program.
func syslogOther(b []byte) bool {
	host, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok || len(host) == 0 {
		return false
	}
	colon := bytes.IndexByte(rest, ':')
	return colon > 0 && colon <= 64 && bytes.IndexByte(rest[:colon], ' ') < 0
}

// stripKernelTag drops "kernel: " or "host kernel: " after a dmesg stamp, as journalctl
// -o short-monotonic prints them.
func stripKernelTag(b []byte) []byte {
	if msg, ok := cutKernelTags(b); ok {
		return msg
	}
	if sp := bytes.IndexByte(b, ' '); sp > 0 && sp < 64 {
		if msg, ok := cutKernelTags(b[sp+1:]); ok && bytes.IndexByte(b[:sp], ':') < 0 {
			return msg
		}
	}
	return b
}
