//! `memcpy` and `memmove` for the wasm, which is WebAssembly MVP: without the bulk-memory instructions,
//! every copy the compiled code makes (moving a value, growing or shifting a `Vec`) calls these. They take
//! the place of compiler_builtins' versions, which shift unaligned words into place and weigh as much as a
//! large function of the protocol; here a copy goes word by word where the source, the destination and the
//! length are all multiples of 4 (allocations and the values the crate moves are), byte by byte otherwise.
//!
//! Both are `memmove`: correct for overlapping ranges (copied from the front when the destination is below
//! the source, from the back otherwise). The accesses are volatile so that the compiler cannot recognise
//! the loops as a copy and compile them into a call to `memcpy` itself.
//!
//! Only the wasm exports them under those names; elsewhere they are ordinary functions, tested against the
//! standard library's copies.

use core::ptr::{read_volatile, write_volatile};

/// # Safety
/// `src` and `dst` are valid for `n` bytes of reads and writes respectively.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    let words = (dst as usize | src as usize | n).is_multiple_of(4);
    // SAFETY: every access is within the `n` bytes the caller vouches for, and a word access is aligned
    // (`words`: both addresses and every offset are multiples of 4).
    unsafe {
        if (dst as usize) <= (src as usize) {
            let mut i = 0;
            while i < n {
                if words {
                    write_volatile(
                        dst.add(i).cast::<u32>(),
                        read_volatile(src.add(i).cast::<u32>()),
                    );
                    i += 4;
                } else {
                    write_volatile(dst.add(i), read_volatile(src.add(i)));
                    i += 1;
                }
            }
        } else {
            let mut i = n;
            while i > 0 {
                if words {
                    i -= 4;
                    write_volatile(
                        dst.add(i).cast::<u32>(),
                        read_volatile(src.add(i).cast::<u32>()),
                    );
                } else {
                    i -= 1;
                    write_volatile(dst.add(i), read_volatile(src.add(i)));
                }
            }
        }
    }
    dst
}

/// # Safety
/// As [`memmove`].
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { memmove(dst, src, n) }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// Every overlap, alignment and length of a copy within one buffer gives what the standard
        /// library's `copy_within` gives.
        #[test]
        fn a_copy_within_one_buffer_is_the_standard_one(
            bytes in proptest::collection::vec(any::<u8>(), 64..65),
            from in 0usize..24,
            to in 0usize..24,
            len in 0usize..40,
        ) {
            let mut ours = bytes.clone();
            let mut theirs = bytes;
            theirs.copy_within(from..from + len, to);
            let base = ours.as_mut_ptr();
            // SAFETY: both ranges lie within the 64 bytes of the buffer.
            unsafe { super::memmove(base.add(to), base.add(from), len) };
            prop_assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn copies_word_by_word_between_aligned_buffers() {
        let src: Vec<u32> = (0..100).collect();
        let mut dst = vec![0u32; 100];
        // SAFETY: two distinct buffers of 400 bytes each.
        unsafe { super::memcpy(dst.as_mut_ptr().cast(), src.as_ptr().cast(), 400) };
        assert_eq!(dst, src);
    }
}
