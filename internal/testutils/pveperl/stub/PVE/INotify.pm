package PVE::INotify;

# A stand-in for pve-common's PVE::INotify, of which Proxmox's mapping code needs only
# the node's name: $ENV{PVE_NODE}.

use strict;
use warnings;

sub nodename { return $ENV{PVE_NODE} // die "PVE_NODE is not set\n" }

1;
