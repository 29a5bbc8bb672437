# -*- Python -*-
# lit configuration of the autopar test suite (run through check-autopar).

import os

import lit.formats

config.name = "autopar"
config.test_format = lit.formats.ShTest(not lit_config.isWindows)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "models",
                   "unit", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.autopar_obj_root, "test")

# autopar's tools first, then LLVM's (FileCheck, not, count).
config.environment["PATH"] = os.pathsep.join(
    [config.autopar_tools_dir, config.llvm_tools_dir,
     config.environment.get("PATH", os.environ.get("PATH", ""))])
for var in ["HOME", "TMPDIR"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]

models = os.path.join(config.autopar_src_root, "test", "models")
config.substitutions.append(("%models", models))
config.substitutions.append(("%fixtures", os.path.join(models, "fixtures")))
config.substitutions.append(("%python", config.python))
config.substitutions.append(("%cxx", config.cxx))
config.substitutions.append(("%src_root", config.autopar_src_root))
config.substitutions.append(("%obj_root", config.autopar_obj_root))
config.substitutions.append(
    ("FileCheck", config.filecheck + " --enable-var-scope"))
config.substitutions.append(
    ("%unittests", os.path.join(config.autopar_tools_dir, "autopar-unittests")))

# Tests that export models with PyTorch need Debian's python3-torch.
if config.python and os.system(config.python + " -c 'import torch, onnx' "
                               "> /dev/null 2>&1") == 0:
    config.available_features.add("torch")

# The Hugging Face suite (test/hf) runs in the venv of scripts/install-hf.sh.
hf_python = os.path.join(config.autopar_src_root, ".venv-hf", "bin", "python")
if os.path.exists(hf_python) and os.system(
        hf_python + " -c 'import transformers' > /dev/null 2>&1") == 0:
    config.available_features.add("transformers")
    config.substitutions.append(("%hfpython", hf_python))
    if os.system(hf_python + " -c 'import peft' > /dev/null 2>&1") == 0:
        config.available_features.add("peft")

# Multi-rank tests need OpenMPI (scripts/install-deps.sh installs it); mpirun
# refuses to run as root without these two variables.
import shutil
if shutil.which("mpirun") and shutil.which("mpicxx"):
    config.available_features.add("mpi")
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"

# Small file systems of a test's own (a full or read-only folder for the
# NVMe offload's refusals): a tmpfs mounted in a user and mount namespace,
# where the kernel lets an unprivileged process make one.
if shutil.which("unshare") and os.system(
        "unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs /mnt'"
        " > /dev/null 2>&1") == 0:
    config.available_features.add("unshare-mount")

# The CUDA target's runtime and autopar-cuda-kernels-test were built (nvcc
# found); the test prints a skip line itself where there is no GPU.
if getattr(config, "autopar_cuda", "OFF") == "ON":
    config.available_features.add("cuda")
# The CUDA runtime was built with cuDNN's fused attention (cudnn.h, libcudnn
# and scripts/install-cudnn-frontend.sh's headers found).
if getattr(config, "autopar_cudnn", "OFF") == "ON":
    config.available_features.add("cudnn")
# nvcc compiles the CUDA programs autopar emits (test/cuda); cuda-device:
# this machine also has a GPU to run them on.
if getattr(config, "nvcc", "") and os.path.exists(config.nvcc):
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", config.nvcc))
    config.environment["PATH"] = os.pathsep.join(
        [os.path.dirname(config.nvcc), config.environment["PATH"]])
# The communicator's NCCL build (autopar-comm-nccl-test) was built: NCCL found.
if os.path.exists(os.path.join(config.autopar_tools_dir, "autopar-comm-nccl-test")):
    config.available_features.add("nccl")
if shutil.which("nvidia-smi") and os.system("nvidia-smi -L > /dev/null 2>&1") == 0:
    config.available_features.add("cuda-device")
