package PVE::RS::NVML;

# A stand-in for the Rust binding to NVIDIA's NVML that qemu-server's PCI/Mdev.pm loads;
# reading back a config never calls it.

use strict;
use warnings;

sub creatable_vgpu_types_for_dev { die "PVE::RS::NVML stand-in: no NVML here\n" }

1;
