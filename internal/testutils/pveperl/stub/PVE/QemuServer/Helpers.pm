package PVE::QemuServer::Helpers;

# A stand-in for qemu-server's PVE::QemuServer::Helpers, which PVE::QemuServer::PCI loads
# and parse_hostpci does not call.

use strict;
use warnings;

1;
