//! Stands in for LLVM, which cubecl-cuda links (through cubecl-llvm) but this peer never calls:
//! with the `cuda-cpp` feature cubecl compiles kernels with NVRTC, and the LLVM bundle that
//! cubecl-llvm's build would download cannot be fetched on an offline build machine
//! (`.cargo/config.toml` sets `DOCS_RS`, which skips that download). Each symbol of
//! `llvm_absent.txt` (what the link reported missing) becomes a function that aborts with a
//! message naming it, so a call that should never happen cannot go unnoticed.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=llvm_absent.txt");
    let symbols = std::fs::read_to_string("llvm_absent.txt").expect("llvm_absent.txt");
    let mut c = String::from(
        "#include <stdio.h>\n#include <stdlib.h>\n\
         static void absent(const char *name) {\n  \
         fprintf(stderr, \"lockstep-peer-cubecl: %s called, but this build has no LLVM \
         (cubecl's C++ compiler, cuda-cpp, should never call it)\\n\", name);\n  abort();\n}\n",
    );
    for symbol in symbols.lines().map(str::trim).filter(|s| !s.is_empty()) {
        writeln!(c, "void {symbol}(void) {{ absent(\"{symbol}\"); }}").expect("a String");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("llvm_absent.c");
    std::fs::write(&out, c).expect("write the stubs");
    cc::Build::new()
        .file(&out)
        .warnings(false)
        .compile("llvm_absent");
}
