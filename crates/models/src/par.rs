//! Host loops split over rayon's threads: the size below which a loop stays on the calling
//! thread, fresh output buffers filled row by row, and sums over tasks into f64 accumulators.

use std::mem::MaybeUninit;

use rayon::prelude::*;

/// Below this many floats a host loop runs on the calling thread: handing a few rows to rayon's
/// pool costs more than it saves (batch-1 inference is mostly such calls).
pub const PARALLEL_ELEMS: usize = 1 << 15;

/// A fresh buffer of `len` floats, filled row by row (`row` floats each; the last row may be
/// shorter) by `f(row_index, row)`, on rayon's threads when `len` reaches [`PARALLEL_ELEMS`].
///
/// Each row is zeroed just before `f` sees it, by the thread that fills it and while the row is in
/// its cache, instead of the whole buffer being zeroed up front on the calling thread (a
/// `vec![0.0; len]` of memory the allocator reuses is a single-threaded `memset`).
pub fn fill_rows(len: usize, row: usize, f: impl Fn(usize, &mut [f32]) + Sync + Send) -> Vec<f32> {
    let row = row.max(1);
    let mut out: Vec<f32> = Vec::with_capacity(len);
    let fill = |i: usize, o: &mut [MaybeUninit<f32>]| {
        // SAFETY: all-zero bytes are the f32 0.0; after the write every element of `o` is
        // initialised, so viewing it as `[f32]` is sound.
        let o = unsafe {
            std::ptr::write_bytes(o.as_mut_ptr(), 0, o.len());
            &mut *(o as *mut [MaybeUninit<f32>] as *mut [f32])
        };
        f(i, o);
    };
    let spare = &mut out.spare_capacity_mut()[..len];
    if len < PARALLEL_ELEMS {
        spare.chunks_mut(row).enumerate().for_each(|(i, o)| fill(i, o));
    } else {
        let min_rows = (PARALLEL_ELEMS / 4 / row).max(1);
        spare.par_chunks_mut(row).with_min_len(min_rows).enumerate().for_each(|(i, o)| fill(i, o));
    }
    // SAFETY: the chunks cover all `len` elements and each was written by `fill` (a panic in `f`
    // unwinds past this line, leaving the vector empty).
    unsafe { out.set_len(len) };
    out
}

/// The sum over `tasks` of what `f(task, acc)` adds into an accumulator of `len` floats (f64): on
/// the calling thread when `work` (the floats all tasks read together) is below [`PARALLEL_ELEMS`], else
/// one accumulator per rayon thread, added together at the end.
pub fn sum_tasks(tasks: usize, len: usize, work: usize, f: impl Fn(usize, &mut [f64]) + Sync + Send) -> Vec<f64> {
    let add = |mut a: Vec<f64>, b: Vec<f64>| {
        a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
        a
    };
    if work < PARALLEL_ELEMS {
        let mut acc = vec![0.0f64; len];
        (0..tasks).for_each(|i| f(i, &mut acc));
        return acc;
    }
    (0..tasks)
        .into_par_iter()
        .fold(
            || vec![0.0f64; len],
            |mut acc, i| {
                f(i, &mut acc);
                acc
            },
        )
        .reduce(|| vec![0.0f64; len], add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_starts_at_zero_and_gets_its_index_on_and_off_the_pool() {
        for (len, row) in [(0, 4), (10, 4), (7, 1), (PARALLEL_ELEMS * 2 + 3, 100)] {
            let out = fill_rows(len, row, |i, o| {
                assert!(o.iter().all(|v| *v == 0.0), "row {i} not zeroed");
                assert!(o.len() == row || (i + 1) * row >= len, "row {i} has {} values", o.len());
                o.iter_mut().enumerate().for_each(|(j, v)| *v = (i * row + j) as f32 + 0.5);
            });
            assert_eq!(out.len(), len);
            assert!(out.iter().enumerate().all(|(j, v)| *v == j as f32 + 0.5), "len {len}, row {row}");
        }
    }

    #[test]
    fn a_zero_row_size_is_one_float_per_row() {
        assert_eq!(fill_rows(3, 0, |i, o| o[0] = i as f32), [0.0, 1.0, 2.0]);
    }
}
