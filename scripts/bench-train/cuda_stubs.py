"""Empty stand-ins for the CUDA libraries a PyPI torch wheel links against, so it imports on a
machine without them and runs on the CPU.

PyPI's Linux torch wheel is built with CUDA and names ~12 NVIDIA libraries as dependencies
(several GB). The benchmark only runs CPU kernels, which never call into them, but the dynamic
linker still wants each library and each symbol to exist at load time. This writes one small
shared library per missing soname, defining every symbol torch imports from it (as a function
that aborts if ever called) under the version node torch asks for.

Usage: python cuda_stubs.py TORCH_LIB_DIR OUT_DIR   (then LD_LIBRARY_PATH=OUT_DIR)
"""

import collections
import os
import re
import subprocess
import sys

lib_dir, out_dir = sys.argv[1], sys.argv[2]
os.makedirs(out_dir, exist_ok=True)
libs = [os.path.join(lib_dir, f) for f in os.listdir(lib_dir) if ".so" in f]

missing = set()
for lib in libs:
    ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    missing.update(re.findall(r"^\s*(\S+) => not found", ldd, re.M))

# Undefined dynamic symbols, by the version (= library) they are bound to. Unversioned ones that
# no torch library defines (NCCL, cuSPARSELt, cuFile, the driver) go to the stubs of libraries
# that version nothing (the linker takes the first definition it finds).
by_version = collections.defaultdict(dict)
defined = set()
for lib in libs:
    out = subprocess.run(["readelf", "--dyn-syms", "-W", lib], capture_output=True, text=True).stdout
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 8:
            continue
        if cols[6] != "UND":
            defined.add(cols[7].split("@")[0])
            continue
        kind, name = cols[3], cols[7]
        version = None
        if "@" in name:
            name, version = name.split("@", 1)
            version = version.split(" ")[0]
        by_version[version][name] = kind

# Every stub answers with CUDA's "no device" error (100; NCCL and the others read any non-zero
# as failure), which is what torch's CPU paths expect when they probe for a GPU at import.
STUB_PRELUDE = """#include <stdio.h>
#include <stdlib.h>
static long STUB_ERROR(const char *name) {
    if (getenv("CUDA_STUBS_TRACE")) fprintf(stderr, "cuda stub called: %s\\n", name);
    return 100;
}
"""

version_of = {v: v for v in by_version if v}
version_of["NVSHMEM"] = "libnvshmem_host.so.3"

unversioned = {
    name: kind
    for name, kind in by_version[None].items()
    if name not in defined and not name.startswith("_") and kind != "NOTYPE"
}

for soname in sorted(missing):
    versions = [v for v, lib in version_of.items() if lib == soname]
    symbols = {}
    for v in versions:
        symbols.update(by_version[v])
    if not versions:
        symbols.update(unversioned)
    c_path = os.path.join(out_dir, soname + ".c")
    with open(c_path, "w") as c:
        c.write(STUB_PRELUDE)
        for name, kind in sorted(symbols.items()):
            if kind == "OBJECT":
                c.write(f"char {name}[256];\n")
            else:
                c.write(f"long {name}(void) {{ return STUB_ERROR(\"{name}\"); }}\n")
    script = os.path.join(out_dir, soname + ".map")
    with open(script, "w") as m:
        for v in versions or [soname]:
            m.write(f"{v} {{ global: *; }};\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-w", "-o", os.path.join(out_dir, soname), c_path,
         f"-Wl,-soname,{soname}", f"-Wl,--version-script,{script}"],
        check=True,
    )
    os.remove(c_path)
    os.remove(script)
    print(f"stub {soname}: {len(symbols)} symbols")
