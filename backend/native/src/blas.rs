//! Single-precision matrix products through the system's OpenBLAS, loaded at run time.
//!
//! candle's CPU matmul (the `gemm` crate on stable Rust) has AVX2 kernels only; OpenBLAS picks
//! AVX-512 kernels where the CPU has them. On this project's 2-core machine it multiplies the
//! SmolLM2-135M training shapes at 165–190 GFLOP/s against about 65 for candle. The library is
//! optional (`libopenblas0` on Debian): [`Blas::get`] answers `None` without it and callers keep
//! their own path.

use std::ffi::{CStr, c_float, c_int, c_void};
use std::sync::OnceLock;

const CBLAS_ROW_MAJOR: c_int = 101;
const CBLAS_NO_TRANS: c_int = 111;
const CBLAS_TRANS: c_int = 112;

type Sgemm = unsafe extern "C" fn(
    order: c_int,
    trans_a: c_int,
    trans_b: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: c_float,
    a: *const c_float,
    lda: c_int,
    b: *const c_float,
    ldb: c_int,
    beta: c_float,
    c: *mut c_float,
    ldc: c_int,
);

/// The shared libraries tried in order: Debian's OpenBLAS (32-bit integers), then whichever
/// `libopenblas.so` the loader finds.
const LIBRARIES: [&CStr; 2] = [c"libopenblas.so.0", c"libopenblas.so"];

/// A loaded OpenBLAS; lives for the whole process (never unloaded).
#[derive(Clone, Copy)]
pub struct Blas {
    sgemm: Sgemm,
}

/// Why a product was refused before reaching the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlasError {
    /// A slice is shorter or longer than its matrix's dimensions say.
    Length {
        /// Which slice: `a`, `b` or `c`.
        operand: &'static str,
        /// The element count its dimensions give.
        expected: usize,
        /// Its length.
        actual: usize,
    },
    /// A dimension does not fit the library's 32-bit integers.
    TooLarge(usize),
}

impl std::fmt::Display for BlasError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlasError::Length {
                operand,
                expected,
                actual,
            } => write!(f, "{operand} has {actual} elements, {expected} expected"),
            BlasError::TooLarge(n) => write!(f, "dimension {n} exceeds the BLAS integer range"),
        }
    }
}

impl std::error::Error for BlasError {}

/// How an operand is read: as stored, or as the transpose of what is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orientation {
    /// `a` is stored m × k, `b` k × n.
    AsStored,
    /// `a` is stored k × m, `b` n × k, each read as its transpose.
    Transposed,
}

impl Blas {
    /// The process's OpenBLAS, loaded on first use; `None` when the system has none or
    /// `LACHESIS_BLAS=off` asks for candle's own kernels.
    pub fn get() -> Option<Blas> {
        static LOADED: OnceLock<Option<Blas>> = OnceLock::new();
        *LOADED.get_or_init(|| {
            if std::env::var("LACHESIS_BLAS").is_ok_and(|v| v == "off") {
                return None;
            }
            LIBRARIES.iter().find_map(|name| load(name))
        })
    }

    /// `c = op(a) · op(b)`, all row-major: op(a) is m × k, op(b) is k × n, each stored as is or
    /// transposed ([`Orientation`]), and `c` is m × n, overwritten.
    pub fn sgemm(
        &self,
        (a, a_is): (&[f32], Orientation),
        (b, b_is): (&[f32], Orientation),
        c: &mut [f32],
        (m, n, k): (usize, usize, usize),
    ) -> Result<(), BlasError> {
        check("a", a.len(), m * k)?;
        check("b", b.len(), k * n)?;
        check("c", c.len(), m * n)?;
        let [mi, ni, ki] =
            [m, n, k].map(|d| c_int::try_from(d).map_err(|_| BlasError::TooLarge(d)));
        let (mi, ni, ki) = (mi?, ni?, ki?);
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            c.fill(0.0);
            return Ok(());
        }
        let (trans_a, lda) = match a_is {
            Orientation::AsStored => (CBLAS_NO_TRANS, ki),
            Orientation::Transposed => (CBLAS_TRANS, mi),
        };
        let (trans_b, ldb) = match b_is {
            Orientation::AsStored => (CBLAS_NO_TRANS, ni),
            Orientation::Transposed => (CBLAS_TRANS, ki),
        };
        // SAFETY: the three slices hold exactly m·k, k·n and m·n elements (checked above), which
        // is what cblas_sgemm reads and writes for these row-major leading dimensions (k or m
        // for `a`, n or k for `b`, matching each operand's orientation); `c` is
        // borrowed mutably, so it does not alias `a` or `b`. The function pointer came from the
        // library's own `cblas_sgemm` symbol with this C signature.
        unsafe {
            (self.sgemm)(
                CBLAS_ROW_MAJOR,
                trans_a,
                trans_b,
                mi,
                ni,
                ki,
                1.0,
                a.as_ptr(),
                lda,
                b.as_ptr(),
                ldb,
                0.0,
                c.as_mut_ptr(),
                ni,
            );
        }
        Ok(())
    }
}

/// OpenBLAS's idle worker threads spin, yielding the CPU in a loop, for 2^28 cycles (about a
/// tenth of a second) after each product before they sleep. Between a training step's products
/// the step's element-wise kernels need those cores: on 2 cores the spinning cost 10–20% of a
/// SmolLM2 step. `OPENBLAS_THREAD_TIMEOUT=4` (2^4 cycles, the library's minimum) makes them sleep
/// at once; it is read when the library loads.
///
/// Sets it unless the environment already does, and only while the process has a single thread
/// (no other thread can then read the environment as it changes). Call first thing in `main`;
/// answers whether it was set.
pub fn quiet_idle_workers() -> bool {
    if std::env::var_os("OPENBLAS_THREAD_TIMEOUT").is_some() || !single_threaded() {
        return false;
    }
    // SAFETY: the process has one thread, this one (checked just above), so nothing reads the
    // environment concurrently; only this thread could start another, and it is here.
    unsafe { std::env::set_var("OPENBLAS_THREAD_TIMEOUT", "4") };
    true
}

/// Whether the kernel counts one thread in this process.
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Threads:"))
                .map(|n| n.trim() == "1")
        })
        .unwrap_or(false)
}

fn check(operand: &'static str, actual: usize, expected: usize) -> Result<(), BlasError> {
    if actual == expected {
        Ok(())
    } else {
        Err(BlasError::Length {
            operand,
            expected,
            actual,
        })
    }
}

fn load(name: &CStr) -> Option<Blas> {
    // SAFETY: dlopen takes a NUL-terminated name; RTLD_LOCAL keeps the library's symbols out of
    // the global namespace. A library that fails to load gives a null handle, handled below.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: `handle` is a live library handle (never closed) and the symbol name is
    // NUL-terminated.
    let symbol: *mut c_void = unsafe { libc::dlsym(handle, c"cblas_sgemm".as_ptr()) };
    if symbol.is_null() {
        return None;
    }
    // SAFETY: `cblas_sgemm` has the C signature of `Sgemm` in every CBLAS with 32-bit integers
    // (Debian's libopenblas0); the library stays loaded for the life of the process.
    let sgemm = unsafe { std::mem::transmute::<*mut c_void, Sgemm>(symbol) };
    Some(Blas { sgemm })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive triple loop, written out: the expectation is not the code under test.
    fn naive(
        (a, a_is): (&[f32], Orientation),
        (b, b_is): (&[f32], Orientation),
        (m, n, k): (usize, usize, usize),
    ) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| {
                        let av = match a_is {
                            Orientation::AsStored => a[i * k + p],
                            Orientation::Transposed => a[p * m + i],
                        };
                        let bv = match b_is {
                            Orientation::AsStored => b[p * n + j],
                            Orientation::Transposed => b[j * k + p],
                        };
                        av * bv
                    })
                    .sum();
            }
        }
        c
    }

    /// The test command installs OpenBLAS (`scripts/ensure-tools.sh`), so its absence is a
    /// failure, not a skip.
    fn blas() -> Blas {
        Blas::get().expect("OpenBLAS (libopenblas0) is installed and loads")
    }

    #[test]
    fn products_equal_the_triple_loop_in_every_orientation() {
        let blas = blas();
        let (m, n, k) = (7, 5, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let both = [Orientation::AsStored, Orientation::Transposed];
        for a_is in both {
            for b_is in both {
                let mut c = vec![f32::NAN; m * n];
                blas.sgemm((&a, a_is), (&b, b_is), &mut c, (m, n, k))
                    .unwrap();
                let expected = naive((&a, a_is), (&b, b_is), (m, n, k));
                for (got, want) in c.iter().zip(&expected) {
                    assert!(
                        (got - want).abs() < 1e-5,
                        "{a_is:?}/{b_is:?}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn idle_workers_are_left_alone_once_the_process_has_threads() {
        // The test harness runs tests on threads of its own, so the process is never
        // single-threaded here: the variable must not be touched.
        let before = std::env::var_os("OPENBLAS_THREAD_TIMEOUT");
        assert!(!single_threaded());
        assert!(!quiet_idle_workers());
        assert_eq!(std::env::var_os("OPENBLAS_THREAD_TIMEOUT"), before);
    }

    #[test]
    fn wrong_lengths_are_refused_before_the_library_sees_them() {
        let blas = blas();
        let mut c = vec![0.0; 4];
        let err = blas
            .sgemm(
                (&[1.0; 5], Orientation::AsStored),
                (&[1.0; 4], Orientation::AsStored),
                &mut c,
                (2, 2, 2),
            )
            .unwrap_err();
        assert_eq!(
            err,
            BlasError::Length {
                operand: "a",
                expected: 4,
                actual: 5
            }
        );
        assert_eq!(c, vec![0.0; 4]);
    }
}
