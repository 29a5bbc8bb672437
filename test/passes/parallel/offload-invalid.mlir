// RUN: not autopar-opt %s --autopar-dist-offload 2>&1 | FileCheck %s

// CHECK: error: 'dist.offload' must be "none" or "cpu", got "nvme"
module attributes {dist.offload = "nvme"} {
}
