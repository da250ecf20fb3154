//! Handing the heap memory a finished phase freed back to the system. The allocator keeps freed
//! memory for later use; when the next phase allocates in other sizes (the commitlog pass of
//! `verify` makes many small per-queue records, the plan of `repair` others), the process holds
//! both at once. On a store of 50,000 queues this is what takes `repair --dry-run` over 200 MB
//! (see README, "Measured").

/// Return the free memory of the allocator's arenas to the system (glibc `malloc_trim`); a no-op
/// elsewhere.
pub fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        #[allow(unsafe_code)]
        // SAFETY: malloc_trim only returns pages that hold no live allocation to the system; it
        // takes the arenas' own locks and changes no memory the program uses.
        unsafe {
            malloc_trim(0);
        }
    }
}
