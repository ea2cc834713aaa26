package pve

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestIsHookSnippetName(t *testing.T) {
	for name, want := range map[string]bool{
		"gpusplit-hook": true, "gpusplit-hook-131": true, "gpusplit-hook-100": true,
		"gpusplit-hook-": false, "gpusplit-hook-x": false, "gpusplit-hook-0131": false, "gpusplit-hook-0": false,
		"gpusplit-hook.sh": false, "mine.pl": false, "gpusplit": false, "my-gpusplit-hook": false,
	} {
		if got := IsHookSnippetName(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
	if SnippetName(131, false) != "gpusplit-hook" || SnippetName(131, true) != "gpusplit-hook-131" {
		t.Error(SnippetName(131, false), SnippetName(131, true))
	}
}

func TestSnippetVolume(t *testing.T) {
	for _, c := range []struct{ vol, storage, file string }{
		{"local:snippets/gpusplit-hook-131", "local", "gpusplit-hook-131"},
		{"cephfs:snippets/x.sh", "cephfs", "x.sh"},
		{"local:snippets/", "", ""},
		{"local:snippets/a/b", "", ""},
		{"local:snippets/..", "", ""},
		{"local:iso/x", "", ""},
		{":snippets/x", "", ""},
		{"snippets/x", "", ""},
	} {
		s, f, err := SnippetVolume(c.vol)
		if s != c.storage || f != c.file || (err == nil) != (c.file != "") {
			t.Errorf("%q: %q %q %v", c.vol, s, f, err)
		}
	}
}

// What Render writes, ParseHookScript reads back; a file without gpusplit's mark is not
// gpusplit's.
func TestHookScriptRoundTrip(t *testing.T) {
	for _, s := range []HookScript{
		{Binary: "/usr/bin/gpusplit"},
		{Guest: 131, Binary: "/usr/local/bin/gpusplit", Deadline: "5m0s"},
		{Guest: 129, Binary: "/opt/it's/gpusplit", Chained: "local:snippets/mine.pl", ChainedPath: "/var/lib/vz/snippets/mine.pl"},
		{Guest: 7001, Binary: "/usr/bin/gpusplit", Deadline: "90s", Chained: "nfs:snippets/a b", ChainedPath: "/mnt/pve/nfs/snippets/a b"},
	} {
		body := s.Render()
		got, ok := ParseHookScript(body)
		if !ok || !reflect.DeepEqual(got, s) {
			t.Errorf("%+v:\n%s\nread back %+v %v", s, body, got, ok)
		}
		if s.Guest != 0 && !strings.Contains(body, fmt.Sprintf("\n# guest: %d\n", s.Guest)) {
			t.Errorf("no guest line:\n%s", body)
		}
	}
	if _, ok := ParseHookScript("#!/bin/sh\nexec /usr/bin/gpusplit hook \"$@\"\n"); ok {
		t.Error("a script gpusplit did not write taken as its own")
	}
}

func TestStorageShared(t *testing.T) {
	sts, err := ParseStorage(storageCfg + "\ndir: nas\n\tpath /mnt/nas\n\tcontent snippets\n\tshared 1\n\ncephfs: cfs\n\tcontent snippets\n\ndir: not\n\tpath /srv/n\n\tshared 0\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"local": false, "local-lvm": false, "shared": true, "old": false, "nas": true, "cfs": true, "not": false}
	for _, s := range sts {
		if s.IsShared() != want[s.ID] {
			t.Errorf("%s: shared %v, want %v", s.ID, s.IsShared(), want[s.ID])
		}
	}
}

// Every guest config on every node that names the snippet, snapshots included; the
// guest's own config left out by OthersThan, its snapshots not.
func TestSnippetUsers(t *testing.T) {
	h := clusterHost(t, map[string]string{
		"etc/pve/nodes/n1/qemu-server/131.conf": "hookscript: local:snippets/gpusplit-hook-131\nname: a\n",
		"etc/pve/nodes/n1/qemu-server/132.conf": "hookscript: local:snippets/gpusplit-hook-131\nname: clone\n\n[snap]\nhookscript: local:snippets/gpusplit-hook-131\n",
		"etc/pve/nodes/n2/lxc/200.conf":         "arch: amd64\nhookscript: local:snippets/gpusplit-hook-131\n",
		"etc/pve/nodes/n3/qemu-server/300.conf": "hookscript: other:snippets/gpusplit-hook-131\n",
		"etc/pve/nodes/n3/qemu-server/301.conf": "hookscript: local:snippets/gpusplit-hook-1311\n",
		"etc/pve/nodes/n3/qemu-server/302.conf": "name: none\n",
	})
	users, notes, err := SnippetUsers(h, "local:snippets/gpusplit-hook-131")
	if err != nil || len(notes) > 0 {
		t.Fatal(err, notes)
	}
	var got []string
	for _, u := range users {
		got = append(got, u.Node+" "+u.Label())
	}
	want := []string{"n1 VM 131", "n1 VM 132", "n1 VM 132 (snapshot snap)", "n2 CT 200"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("users %q, want %q", got, want)
	}
	got = nil
	for _, u := range OthersThan(users, 132) {
		got = append(got, u.Label())
	}
	if want := []string{"VM 131", "VM 132 (snapshot snap)", "CT 200"}; !reflect.DeepEqual(got, want) {
		t.Errorf("others than 132: %q, want %q", got, want)
	}
	if _, _, err := SnippetUsers(h, "nonsense"); err == nil {
		t.Error("a volume that is no snippet accepted")
	}
}

func TestGuestNodes(t *testing.T) {
	const vm = "etc/pve/nodes/n1/qemu-server/100.conf"
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string // node: why | …
		notes string
	}{
		{"any member by migration", nil, "n2: a migration may move it there | n3: a migration may move it there", ""},
		{"HA with a strict rule keeps it on its nodes",
			map[string]string{"etc/pve/ha/resources.cfg": "vm: 100\n\tstate started\n\n", "etc/pve/ha/rules.cfg": "node-affinity: r\n\tnodes n1,n2\n\tresources vm:100\n\tstrict 1\n\n"},
			"n2: HA may recover it there (rule r, strict: n1, n2)", ""},
		{"replication, and migration elsewhere",
			map[string]string{"etc/pve/replication.cfg": "local: 100-0\n\ttarget n3\n\n"},
			"n2: a migration may move it there | n3: replication job 100-0 keeps its disks there to move it there", ""},
		{"a container", map[string]string{vm: "", "etc/pve/nodes/n2/lxc/100.conf": "arch: amd64\n"}, "n1: a migration may move it there | n3: a migration may move it there", ""},
		{"without .members, the nodes with directories", map[string]string{"etc/pve/.members": "", "etc/pve/nodes/n4/qemu-server/5.conf": "x: y\n"},
			"n4: a migration may move it there", ".members is missing"},
		{"a node alone", map[string]string{"etc/pve/.members": `{"nodename": "n1", "version": 1}`}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := clusterHost(t, c.files)
			kind := QEMU
			if c.name == "a container" {
				kind = LXC
			}
			own, others, notes, err := GuestNodes(h, kind, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range others {
				got = append(got, o.Node+": "+strings.Join(o.Why, "; "))
			}
			wantOwn := "n1"
			if kind == LXC {
				wantOwn = "n2"
			}
			if own != wantOwn || strings.Join(got, " | ") != c.want {
				t.Errorf("own %q, others %q\nwant %q, %q", own, strings.Join(got, " | "), wantOwn, c.want)
			}
			if !strings.Contains(strings.Join(notes, "\n"), c.notes) {
				t.Errorf("notes %q, want %q", notes, c.notes)
			}
		})
	}
}

func TestSnippetNodes(t *testing.T) {
	others := []NodeWhy{{Node: "n2", Why: []string{"a"}}, {Node: "n3", Why: []string{"b"}}}
	names := func(ns []NodeWhy) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Node)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		name             string
		s                Storage
		install, missing string
	}{
		{"local", Storage{Type: "dir", ID: "local"}, "n2,n3", ""},
		{"dir marked shared", Storage{Type: "dir", ID: "nas", Shared: true}, "", ""},
		{"nfs", Storage{Type: "nfs", ID: "n"}, "", ""},
		{"nfs on n1 and n2 only", Storage{Type: "nfs", ID: "n", Nodes: []string{"n1", "n2"}}, "", "n3"},
		{"local on n1 and n3", Storage{Type: "dir", ID: "l", Nodes: []string{"n1", "n3"}}, "n3", "n2"},
	} {
		install, missing := SnippetNodes(c.s, others)
		if names(install) != c.install || names(missing) != c.missing {
			t.Errorf("%s: install %q missing %q, want %q %q", c.name, names(install), names(missing), c.install, c.missing)
		}
	}
}
