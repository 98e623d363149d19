//! The C ABI (`fortran/soslb.h`), under the Fortran module `fortran/soslb.f90`.
//!
//! Every function returns 0 or an error code ([`crate::error::code`]) and
//! keeps the message for [`soslb_error_message`] (a successful call clears
//! it). No panic crosses this boundary: each body runs under `catch_unwind`.

use crate::balancer::Balancer;
use crate::error::{Error, Result, code};
use crate::stats::{Observables, Statistic};
use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The opaque handle of the C ABI (`soslb` in the header).
pub struct Handle(Balancer);

/// Run `f`, turning errors and panics into codes and messages.
fn guard(f: impl FnOnce() -> Result<()>) -> c_int {
    let (code, message) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            LAST_ERROR.with(|m| m.borrow_mut().clear());
            return code::OK;
        }
        Ok(Err(e)) => (e.code(), e.to_string()),
        Err(panic) => (code::INTERNAL, Error::from_panic("", &*panic).to_string()),
    };
    LAST_ERROR.with(|m| *m.borrow_mut() = message);
    code
}

fn handle<'a>(lb: *mut Handle) -> Result<&'a mut Balancer> {
    // SAFETY: a non-null `lb` is a pointer returned by soslb_init and not yet
    // finalised (the caller's contract in the header).
    unsafe { lb.as_mut() }.map(|h| &mut h.0).ok_or_else(|| {
        Error::argument(
            "lb",
            "is NULL: call soslb_init first, and not after soslb_finalize",
        )
    })
}

fn out<'a, T>(p: *mut T, name: &'static str) -> Result<&'a mut T> {
    // SAFETY: a non-null pointer to a writable T (the caller's contract).
    unsafe { p.as_mut() }.ok_or_else(|| Error::argument(name, "is NULL"))
}

/// See `fortran/soslb.h`.
///
/// # Safety
/// `config` is NULL or a NUL-terminated string; `lb` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn soslb_init(
    comm: i32,
    total: i64,
    config: *const c_char,
    lb: *mut *mut Handle,
) -> c_int {
    guard(|| {
        let lb = out(lb, "lb")?;
        *lb = std::ptr::null_mut();
        let path = if config.is_null() {
            None
        } else {
            // SAFETY: non-null and NUL-terminated (the caller's contract).
            let s = unsafe { CStr::from_ptr(config) }
                .to_str()
                .map_err(|_| Error::argument("config", "the path is not valid UTF-8"))?;
            Some(s.trim_end().to_string()).filter(|s| !s.is_empty())
        };
        let balancer = Balancer::from_fortran(comm, total, path.as_deref().map(Path::new))?;
        *lb = Box::into_raw(Box::new(Handle(balancer)));
        Ok(())
    })
}

/// See `fortran/soslb.h`.
///
/// # Safety
/// `lb` comes from `soslb_init`; `first` and `count` point to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn soslb_next(lb: *mut Handle, first: *mut i64, count: *mut i64) -> c_int {
    guard(|| {
        let (first, count) = (out(first, "first")?, out(count, "count")?);
        *count = 0;
        if let Some(ids) = handle(lb)?.next()? {
            *first = ids.start as i64;
            *count = (ids.end - ids.start) as i64;
        }
        Ok(())
    })
}

/// See `fortran/soslb.h`.
///
/// # Safety
/// `lb` comes from `soslb_init`; `values` points to `n` readable doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn soslb_add(lb: *mut Handle, values: *const f64, n: i64) -> c_int {
    guard(|| {
        let lb = handle(lb)?;
        // Checked before the slice is made: no slice of more than MAX.
        let most = Observables::MAX;
        let Some(n) = usize::try_from(n).ok().filter(|n| (1..=most).contains(n)) else {
            return Err(Error::argument(
                "n",
                format!("n = {n}: a realisation has 1 to {most} observables"),
            ));
        };
        if values.is_null() {
            return Err(Error::argument("values", "NULL: pass n values"));
        }
        // SAFETY: `values` points to `n` doubles (the caller's contract).
        let values = unsafe { std::slice::from_raw_parts(values, n) };
        lb.add(values)
    })
}

/// See `fortran/soslb.h`.
///
/// # Safety
/// `lb` comes from `soslb_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn soslb_stop(lb: *mut Handle) -> c_int {
    guard(|| {
        handle(lb)?.stop();
        Ok(())
    })
}

/// See `fortran/soslb.h`.
///
/// # Safety
/// `lb` points to a handle from `soslb_init` (or NULL); `mean`, `variance`
/// and `std_error` are NULL or point to `n` writable doubles; `count` is
/// NULL or points to a writable `int64_t`; `computed` is NULL or points to
/// `ranks` writable `int64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn soslb_finalize(
    lb: *mut *mut Handle,
    mean: *mut f64,
    variance: *mut f64,
    std_error: *mut f64,
    n: i64,
    count: *mut i64,
    computed: *mut i64,
    ranks: i64,
) -> c_int {
    guard(|| {
        let slot = out(lb, "lb")?;
        if slot.is_null() {
            return Err(Error::argument(
                "lb",
                "is NULL: soslb_init failed or soslb_finalize was called twice",
            ));
        }
        // SAFETY: the pointer came from Box::into_raw in soslb_init; the slot
        // is cleared so that it is freed once.
        let balancer = unsafe { Box::from_raw(std::mem::replace(slot, std::ptr::null_mut())) }.0;
        // The collective comes first, so that a bad argument leaves no rank
        // waiting; on an error the caller's arrays are left as they are.
        let summary = balancer.finish()?;
        let n = usize::try_from(n).map_err(|_| Error::argument("n", format!("{n} is negative")))?;
        let ranks = usize::try_from(ranks)
            .map_err(|_| Error::argument("ranks", format!("{ranks} is negative")))?;
        // SAFETY: NULL or a writable int64_t (the caller's contract).
        if let Some(count) = unsafe { count.as_mut() } {
            *count = summary.count as i64;
        }
        type Column = (*mut f64, fn(&Statistic) -> f64);
        let columns: [Column; 3] = [
            (mean, |s| s.mean),
            (variance, |s| s.variance),
            (std_error, |s| s.std_error),
        ];
        for (array, of) in columns.into_iter().filter(|(a, _)| !a.is_null()) {
            for k in 0..n {
                let v = summary.statistics.get(k).map_or(f64::NAN, of);
                // SAFETY: a non-null array holds n doubles (the caller's contract).
                unsafe { *array.add(k) = v };
            }
        }
        if !computed.is_null() {
            for r in 0..ranks {
                let c = summary.ranks.get(r).map_or(-1, |rep| rep.computed as i64);
                // SAFETY: a non-null `computed` holds `ranks` int64_t (the caller's contract).
                unsafe { *computed.add(r) = c };
            }
        }
        Ok(())
    })
}

/// See `fortran/soslb.h` and [`crate::seed::seed`]: the start of the random
/// stream of realisation `id` (0-based), the same on every rank and run.
#[unsafe(no_mangle)]
pub extern "C" fn soslb_seed(user_seed: u64, id: i64) -> u64 {
    crate::seed::seed(user_seed, id as u64)
}

/// See `fortran/soslb.h`.
///
/// # Safety
/// `buf` points to `len` writable bytes, or is NULL with `len` 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn soslb_error_message(buf: *mut c_char, len: i64) -> i64 {
    LAST_ERROR.with(|m| {
        let m = m.borrow();
        if !buf.is_null() && len > 0 {
            // Cut at a character's boundary: the copy stays valid UTF-8.
            let mut n = m.len().min(len as usize - 1);
            while !m.is_char_boundary(n) {
                n -= 1;
            }
            // SAFETY: `buf` holds `len` > n bytes (the caller's contract).
            unsafe {
                std::ptr::copy_nonoverlapping(m.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        m.len() as i64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_message_is_cut_between_characters() {
        let text = "é".repeat(3);
        assert_eq!(guard(|| Err(Error::Internal(text.clone()))), code::INTERNAL);
        let full = LAST_ERROR.with(|m| m.borrow().clone());
        let at = full.find('é').expect("the message holds the text");
        // Room for the text before the first é and one byte of it.
        let mut buf = vec![0x7f as c_char; at + 2];
        // SAFETY: `buf` holds `buf.len()` writable bytes.
        let len = unsafe { soslb_error_message(buf.as_mut_ptr(), buf.len() as i64) };
        assert_eq!(len, full.len() as i64);
        // SAFETY: soslb_error_message wrote a NUL within `buf`.
        let copied = unsafe { CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(copied.to_str(), Ok(&full[..at]));
    }
}
