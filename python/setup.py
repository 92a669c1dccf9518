"""Builds and installs structgrad's PyTorch operators: `pip install --no-build-isolation ./python`.

The operator library is built by CMake (python/CMakeLists.txt) against the PyTorch installed in
the running environment. Environment variables:
  STRUCTGRAD_CUDA        AUTO (default: with CUDA when nvcc is found), ON or OFF
  STRUCTGRAD_CMAKE_ARGS  further CMake arguments, e.g. "-DCMAKE_CUDA_ARCHITECTURES=90a"
  STRUCTGRAD_BUILD_DIR   a build directory to keep between installs (default: under build/)
  CXX                    the C++ compiler; it must link the shared libstdc++ that PyTorch uses
"""
import os
import shlex
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def links_shared_libstdcxx(compiler):
    """True when `compiler` links the shared libstdc++. One that links it statically puts a second
    C++ runtime into the process beside PyTorch's, and an exception crossing the two crashes."""
    try:
        found = subprocess.run([compiler, "-print-file-name=libstdc++.so"], capture_output=True, text=True)
    except OSError:
        return False
    return found.returncode == 0 and os.path.isabs(found.stdout.strip())


def cxx_compiler():
    """$CXX, or c++; where that one has no shared libstdc++, the system's /usr/bin/c++ if it has."""
    wanted = os.environ.get("CXX", "c++")
    if links_shared_libstdcxx(wanted):
        return wanted
    fallback = "/usr/bin/c++"
    if links_shared_libstdcxx(fallback):
        print(f"structgrad: {wanted} has no shared libstdc++ (PyTorch extensions need it); using {fallback}")
        return fallback
    raise RuntimeError(f"structgrad: {wanted} has no shared libstdc++, which PyTorch extensions need; "
                       "set CXX to a compiler that has one")


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import torch
        from torch.utils import cpp_extension

        output = Path(self.get_ext_fullpath(ext.name)).resolve()
        output.parent.mkdir(parents=True, exist_ok=True)
        build = Path(os.environ.get("STRUCTGRAD_BUILD_DIR", Path(self.build_temp).resolve() / "cmake"))
        compiler = cxx_compiler()
        generator = ["-G", "Ninja"] if subprocess.run(["ninja", "--version"], capture_output=True).returncode == 0 else []
        args = [
            "cmake", "-S", str(HERE), "-B", str(build), *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_CXX_COMPILER={compiler}",
            f"-DCMAKE_CUDA_HOST_COMPILER={compiler}",
            f"-DTORCH_INCLUDE_DIRS={';'.join(cpp_extension.include_paths())}",
            f"-DTORCH_LIBRARY_DIR={cpp_extension.library_paths()[0]}",
            f"-DTORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            f"-DSG_CUDA={os.environ.get('STRUCTGRAD_CUDA', 'AUTO')}",
            f"-DSG_TORCH_OUTPUT={output}",
            *shlex.split(os.environ.get("STRUCTGRAD_CMAKE_ARGS", "")),
        ]
        subprocess.check_call(args)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "structgrad_torch",
                               "-j", str(os.cpu_count() or 2)])


setup(
    name="structgrad",
    version="0.1.0",
    description="structgrad's structured matrix products as PyTorch operators with autograd",
    packages=["structgrad", "structgrad.torch"],
    ext_modules=[Extension("structgrad.torch._structgrad_ops", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["torch>=2.4"],
)
