// RUN: not autopar-opt %s --autopar-dist-offload 2>&1 | FileCheck %s

// CHECK: error: unknown offload target 'nvme' (expected cpu)
module attributes {dist.offload = "nvme"} {
}
