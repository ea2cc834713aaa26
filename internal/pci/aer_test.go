package pci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpusplit/gpusplit/internal/host"
	"github.com/gpusplit/gpusplit/internal/samplehost"
)

// The counter files as the kernel's aer_stats_dev_attr writes them: every error it
// names, a bit it does not name only when counted, the total last.
const (
	aerCorrectable = "RxErr 3\nBadTLP 1\nBadDLLP 7\nRollover 0\nTimeout 2\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\ndev_cor_errs_bit[3] 1\nTOTAL_ERR_COR 14\n"
	aerNonFatal    = "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 2\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\nPoisonTLPBlocked 0\nTOTAL_ERR_NONFATAL 2\n"
	aerFatal       = "Undefined 0\nDLP 0\nSDES 1\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\nPoisonTLPBlocked 0\nTOTAL_ERR_FATAL 1\n"
)

// sampleGPU is the sysfs directory of one of the sample host's GPUs.
const sampleGPU = "/sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0"

// The sample host as a directory, with files written into it.
func sampleWith(t *testing.T, files map[string]string) *host.Host {
	t.Helper()
	root := t.TempDir()
	if err := samplehost.Unpack(root); err != nil {
		t.Fatal(err)
	}
	for p, body := range files {
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestReadAER(t *testing.T) {
	h := sampleWith(t, map[string]string{
		sampleGPU + "/aer_dev_correctable": aerCorrectable,
		sampleGPU + "/aer_dev_nonfatal":    aerNonFatal,
		sampleGPU + "/aer_dev_fatal":       aerFatal,
	})
	a, ok, err := ReadAER(h, sampleGPU)
	if err != nil || !ok || a != (AER{Correctable: 14, NonFatal: 2, Fatal: 1}) {
		t.Errorf("ReadAER = %+v, %t, %v; want 14 correctable, 2 nonfatal, 1 fatal", a, ok, err)
	}
	// A device without the files (the sample host was captured without them) has none.
	a, ok, err = ReadAER(h, "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0")
	if err != nil || ok || a != (AER{}) {
		t.Errorf("without the files: %+v, %t, %v; want nothing and no error", a, ok, err)
	}
}

func TestReadAERRefuses(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no total":        {"aer_dev_correctable": "RxErr 3\n", "aer_dev_nonfatal": aerNonFatal, "aer_dev_fatal": aerFatal},
		"not a count":     {"aer_dev_correctable": aerCorrectable, "aer_dev_nonfatal": "TOTAL_ERR_NONFATAL -1\n", "aer_dev_fatal": aerFatal},
		"another's total": {"aer_dev_correctable": aerCorrectable, "aer_dev_nonfatal": aerNonFatal, "aer_dev_fatal": "TOTAL_ERR_NONFATAL 0\n"},
		"one file gone":   {"aer_dev_correctable": aerCorrectable, "aer_dev_nonfatal": aerNonFatal},
	} {
		t.Run(name, func(t *testing.T) {
			in := map[string]string{}
			for f, body := range files {
				in[sampleGPU+"/"+f] = body
			}
			if a, ok, err := ReadAER(sampleWith(t, in), sampleGPU); err == nil || ok || !strings.Contains(err.Error(), "aer_dev_") {
				t.Errorf("%+v, %t, %v; want an error naming the file", a, ok, err)
			}
		})
	}
}
