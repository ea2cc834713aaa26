package PVE::Cluster;

# A stand-in for pve-cluster's PVE::Cluster, which reads and writes /etc/pve through
# pmxcfs: the parsers Proxmox's modules register are kept, and cfs_read_file runs the one
# of a file on the file of that name under $ENV{PVE_ETC}. Nothing is ever written.

use strict;
use warnings;

use base 'Exporter';
our @EXPORT_OK = qw(cfs_lock_file cfs_read_file cfs_register_file cfs_write_file);

my %registered;

sub cfs_register_file {
    my ($file, $parser, $writer) = @_;
    $registered{$file} = { parser => $parser, writer => $writer };
}

sub cfs_read_file {
    my ($file) = @_;
    my $r = $registered{$file} or die "no parser registered for $file\n";
    my $data = '';
    if (open(my $fh, '<', "$ENV{PVE_ETC}/$file")) {
        local $/;
        $data = <$fh>;
        close($fh);
    }
    return $r->{parser}->($file, $data);
}

# write_text is what cfs_write_file would hand pmxcfs: the registered writer's output.
sub write_text {
    my ($file, $cfg) = @_;
    my $r = $registered{$file} or die "no writer registered for $file\n";
    return $r->{writer}->($file, $cfg);
}

sub cfs_write_file { die "PVE::Cluster stand-in: nothing is written\n" }
sub cfs_lock_file { die "PVE::Cluster stand-in: nothing is locked\n" }

1;
