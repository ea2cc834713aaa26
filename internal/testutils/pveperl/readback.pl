#!/usr/bin/perl
# Reads back, with Proxmox VE's own Perl modules, what gpusplit wrote: pve-guest-common's
# PVE::Mapping::PCI (pci.cfg) and qemu-server's PVE::QemuServer::PCI (hostpciN), on
# pve-common's PVE::SectionConfig, PVE::JSONSchema and PVE::SysFSTools. The modules come
# from the include path the caller gives; stub/ stands in for what needs a running
# cluster (PVE::Cluster, PVE::INotify) or NVIDIA's library (PVE::RS::NVML).
#
# The environment says where things are: PVE_ETC is the directory that stands for
# /etc/pve, PVE_NODE the node's name, PVE_ROOT the root whose /sys the sysfs readers
# read (PVE::SysFSTools and PCI/Mdev.pm name /sys/bus/pci and /sys/class/iommu; they are
# loaded with those paths under PVE_ROOT, and nothing else of them changed).
#
# Commands, each printing one JSON document:
#   mapping FILE   parse FILE as pci.cfg and write it back as Proxmox writes it:
#                  {"written": TEXT, "errors": [...], "ids": {ID: {...}}}
#   assert ID      PVE::Mapping::PCI::assert_valid on each entry of this node of mapping
#                  ID in PVE_ETC/mapping/pci.cfg, with the mapping's flags, as a VM start
#                  does: {"entries": [{"path": P, "error": "" or the error}]}
#   hostpci VALUE  PVE::QemuServer::PCI::parse_hostpci on a hostpciN value, mapping and
#                  sysfs included: {"parsed": {...}, "ids": [[functions of each choice]]}

use strict;
use warnings;

use JSON;

my $root = $ENV{PVE_ROOT} // die "PVE_ROOT is not set\n";

# Load the sysfs readers with their paths under PVE_ROOT.
unshift @INC, sub {
    my (undef, $file) = @_;
    return if $file ne 'PVE/SysFSTools.pm' && $file ne 'PVE/QemuServer/PCI/Mdev.pm';
    for my $dir (@INC) {
        next if ref($dir);
        my $path = "$dir/$file";
        next if !-f $path;
        open(my $fh, '<', $path) or die "$path: $!\n";
        my $src = do { local $/; <$fh> };
        close($fh);
        $src =~ s{(["'])/sys/}{$1$root/sys/}g;
        open(my $mem, '<', \$src) or die;
        return $mem;
    }
    return;
};

require PVE::Mapping::PCI;
require PVE::QemuServer::PCI;

my $json = JSON->new->canonical->allow_nonref;
my ($cmd, $arg) = @ARGV;
die "usage: readback.pl mapping FILE | assert ID | hostpci VALUE\n" if !defined($arg);

if ($cmd eq 'mapping') {
    open(my $fh, '<', $arg) or die "$arg: $!\n";
    my $text = do { local $/; <$fh> };
    close($fh);
    my $cfg = PVE::Mapping::PCI->parse_config('mapping/pci.cfg', $text);
    my $errors = [map { "$_->{context}: $_->{err}" } @{ $cfg->{errors} // [] }];
    my $ids = {};
    for my $id (keys %{ $cfg->{ids} }) {
        my $m = $cfg->{ids}->{$id};
        $ids->{$id} = defined($m) ? { %$m } : undef;
    }
    my $written = PVE::Cluster::write_text('mapping/pci.cfg', $cfg);
    print $json->encode({ written => $written, errors => $errors, ids => $ids }), "\n";
} elsif ($cmd eq 'assert') {
    my $cfg = PVE::Mapping::PCI::config();
    my $entries = PVE::Mapping::PCI::find_on_current_node($arg)
        // die "mapping $arg not found\n";
    my $out = [];
    for my $e (@$entries) {
        eval { PVE::Mapping::PCI::assert_valid($arg, $e, $cfg->{ids}->{$arg}) };
        my $err = $@ // '';
        chomp($err);
        push @$out, { path => $e->{path}, error => $err };
    }
    print $json->encode({ entries => $out }), "\n";
} elsif ($cmd eq 'hostpci') {
    my $raw = PVE::JSONSchema::parse_property_string('pve-qm-hostpci', $arg);
    my $d = PVE::QemuServer::PCI::parse_hostpci($arg);
    my $ids = [map { [map { $_->{id} } @$_] } @{ delete $d->{ids} }];
    print $json->encode({ raw => $raw, parsed => $d, ids => $ids }), "\n";
} else {
    die "unknown command $cmd\n";
}
