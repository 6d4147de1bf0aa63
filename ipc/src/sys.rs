//! The only room with `unsafe`: raw libc calls (POSIX shared memory, mmap, futex,
//! pidfd) and the construction of Arrow buffers over the mapping.
//!
//! Why raw libc rather than the `shared_memory` crate: we need `O_EXCL` creation with
//! mode 0600, an early `shm_unlink`, separate read-write and read-only mappings of one
//! segment, and futex waits on words inside it; the crate exposes none of that and is
//! barely maintained. The surface is small enough to audit in one file.
//!
//! Everything above this module is safe code: [`Mapping`] hands out the header as a
//! reference to atomics, copies bytes in and out with bounds checks, and builds
//! zero-copy [`Buffer`]s whose owner keeps the mapping alive.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use arrow_buffer::alloc::Allocation;
use arrow_buffer::Buffer;

use crate::layout::{RingHeader, HEADER_BYTES};

fn cstring(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Creates a new shared-memory object, exclusively, mode 0600, of `size_bytes`.
pub(crate) fn shm_create(name: &str, size_bytes: u64) -> io::Result<OwnedFd> {
    let cname = cstring(name)?;
    let size = libc::off_t::try_from(size_bytes)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
    let fd = check(unsafe {
        libc::shm_open(
            cname.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    })?;
    // SAFETY: `fd` was just returned by a successful shm_open and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // The umask can only remove bits from 0600; fchmod makes the mode exact anyway.
    // SAFETY: `fd` is a valid open descriptor.
    let sized = check(unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) })
        // SAFETY: `fd` is a valid open descriptor; ftruncate has no memory effects.
        .and_then(|_| check(unsafe { libc::ftruncate(fd.as_raw_fd(), size) }));
    if let Err(e) = sized {
        let _ = shm_unlink(name);
        return Err(e);
    }
    Ok(fd)
}

/// Gives `len` bytes of `fd` at `offset` backing store now (tmpfs pages of a segment),
/// so that a full `/dev/shm` is an `ENOSPC` error here instead of a `SIGBUS` at the
/// first write to a page the file system cannot provide.
pub(crate) fn reserve(fd: &OwnedFd, offset: u64, len: u64) -> io::Result<()> {
    let invalid = || io::Error::from(io::ErrorKind::InvalidInput);
    let off = libc::off_t::try_from(offset).map_err(|_| invalid())?;
    let len = libc::off_t::try_from(len).map_err(|_| invalid())?;
    loop {
        // SAFETY: `fd` is a valid open descriptor; posix_fallocate has no memory effects.
        // It returns the error number itself (it does not set errno).
        match unsafe { libc::posix_fallocate(fd.as_raw_fd(), off, len) } {
            0 => return Ok(()),
            libc::EINTR => continue,
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// The size of the file system behind shared-memory segments (`/dev/shm`).
pub fn shm_size_bytes() -> Option<u64> {
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    let path = c"/dev/shm";
    // SAFETY: `path` is NUL-terminated and `st` points to writable memory for a statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs succeeded, so it initialised the struct.
    let st = unsafe { st.assume_init() };
    Some(st.f_blocks.saturating_mul(st.f_frsize))
}

/// Size, owner and mode of an open segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileStat {
    pub(crate) size_bytes: u64,
    pub(crate) uid: u32,
    pub(crate) mode: u32,
}

/// Opens an existing shared-memory object read-write and reports its size, owner, mode.
pub(crate) fn shm_open_existing(name: &str) -> io::Result<(OwnedFd, FileStat)> {
    let cname = cstring(name)?;
    // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
    let fd = check(unsafe { libc::shm_open(cname.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by a successful shm_open and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` points to writable memory large enough for a `stat`; fd is valid.
    check(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it initialised the whole struct.
    let st = unsafe { st.assume_init() };
    let stat = FileStat {
        size_bytes: u64::try_from(st.st_size).unwrap_or(0),
        uid: st.st_uid,
        mode: st.st_mode & 0o7777,
    };
    Ok((fd, stat))
}

/// Removes the name of a shared-memory object (mappings stay valid).
pub(crate) fn shm_unlink(name: &str) -> io::Result<()> {
    let cname = cstring(name)?;
    // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
    check(unsafe { libc::shm_unlink(cname.as_ptr()) }).map(|_| ())
}

/// The real user id of this process.
pub(crate) fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The CPU this thread runs on, plus one; 0 if not known. No system call (glibc reads
/// it from the thread's rseq area); stale as soon as the scheduler moves the thread,
/// so only ever a hint.
pub(crate) fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu has no preconditions; it returns -1 on failure.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).map_or(0, |cpu| cpu.saturating_add(1))
}

/// `CLOCK_MONOTONIC` in nanoseconds: comparable across processes on one machine
/// (unlike `Instant`, whose raw value is not exposed), used for hand-off latency.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// One `mmap` of (part of) a segment; unmapped on drop.
///
/// Invariants: `ptr` is page-aligned and valid for `len` bytes for the lifetime of the
/// value; when `len >= HEADER_BYTES` and the mapping starts at offset 0, its first page
/// is the ring header; read-only mappings are never written through.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
    is_header: bool,
}

// SAFETY: the mapping is plain memory owned by this value. Shared state in it is only
// touched through atomics (the header) or through bounds-checked copies whose
// exclusivity the ring protocol guarantees (the data area), so it may be used from
// any thread.
unsafe impl Send for Mapping {}
// SAFETY: see `Send`; `&Mapping` only offers atomics and copies, never `&mut`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset` (a multiple of the page size).
    /// `offset == 0` mappings of at least a page expose the ring header.
    pub(crate) fn map(fd: &OwnedFd, offset: u64, len: usize, writable: bool) -> io::Result<Self> {
        if len == 0 || !offset.is_multiple_of(HEADER_BYTES as u64) {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh shared mapping chosen by the kernel (addr = null) cannot alias
        // any Rust object; fd is a valid open descriptor; failures are reported as
        // MAP_FAILED and checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap at 0"))?;
        Ok(Self {
            ptr,
            len,
            writable,
            is_header: offset == 0 && len >= HEADER_BYTES,
        })
    }

    /// Whether `addr` points into this mapping (tests check zero-copy with it).
    #[cfg(test)]
    pub(crate) fn contains(&self, addr: usize) -> bool {
        let start = self.ptr.as_ptr() as usize;
        (start..start + self.len).contains(&addr)
    }

    /// The ring header at the start of the mapping.
    ///
    /// # Panics
    /// If this mapping does not start at offset 0 or is shorter than a page (a bug in
    /// the caller, not something the peer controls).
    pub(crate) fn header(&self) -> &RingHeader {
        assert!(self.is_header, "mapping does not hold the ring header");
        // SAFETY: (1) the mapping is page-aligned and at least HEADER_BYTES long, which
        // covers size_of::<RingHeader>() and its 64-byte alignment; (2) RingHeader is
        // repr(C) and made only of atomics and byte arrays, for which every bit pattern
        // (zeroed by ftruncate, or anything a peer wrote) is valid; (3) all mutation goes
        // through atomics, so sharing `&RingHeader` across threads and processes is
        // race-free; (4) the reference cannot outlive `self`, which owns the mapping.
        unsafe { self.ptr.cast::<RingHeader>().as_ref() }
    }

    /// Copies `out.len()` bytes at `offset` out of the mapping with volatile reads: the
    /// copy is then validated, never the shared bytes themselves. `None` if out of bounds.
    pub(crate) fn read_into(&self, offset: usize, out: &mut [u8]) -> Option<()> {
        let end = offset.checked_add(out.len())?;
        if end > self.len {
            return None;
        }
        for (i, byte) in out.iter_mut().enumerate() {
            // SAFETY: offset + i < end <= len, so the address is inside the live mapping;
            // u8 has no alignment or validity requirements; volatile because the peer
            // process may be writing concurrently (we only ever use the copy).
            *byte = unsafe { self.ptr.add(offset + i).as_ptr().read_volatile() };
        }
        Some(())
    }

    /// Copies `src` into the mapping at `offset`. `None` if out of bounds.
    ///
    /// # Panics
    /// On a read-only mapping (a bug in the caller).
    pub(crate) fn write_from(&self, offset: usize, src: &[u8]) -> Option<()> {
        assert!(self.writable, "write to a read-only mapping");
        let end = offset.checked_add(src.len())?;
        if end > self.len {
            return None;
        }
        // SAFETY: (1) [offset, end) lies inside the live, writable mapping; (2) `src` is a
        // Rust slice in process memory and cannot overlap the fresh mmap region; (3) no
        // Rust reference into this range exists in this process: the producer writes only
        // into space the consumer has released (ring protocol), and the consumer maps the
        // data area read-only, so its buffers live in a different mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset).as_ptr(), src.len());
        }
        Some(())
    }
}

/// The page size (a record range is widened to whole pages before it is remapped).
fn page_bytes() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

impl Mapping {
    /// Detaches this mapping from its segment: the pages that hold `keep` (byte ranges
    /// of the mapping, widened to whole pages) are replaced by private copies at the
    /// same addresses, everything else by inaccessible anonymous memory. Zero-copy
    /// buffers into the kept ranges stay valid and unchanged; the segment's space behind
    /// them can be given back to the producer. Readers of the ring must use a new
    /// mapping from here on.
    pub(crate) fn detach(&self, keep: &[std::ops::Range<usize>]) -> io::Result<()> {
        let page = page_bytes();
        let mut widened = Vec::with_capacity(keep.len());
        for r in keep.iter().filter(|r| !r.is_empty()) {
            let start = r.start / page * page;
            let end = r.end.div_ceil(page).saturating_mul(page).min(self.len);
            if start >= end {
                return Err(io::Error::from(io::ErrorKind::InvalidInput));
            }
            widened.push(start..end);
        }
        widened.sort_by_key(|r| r.start);
        let mut pages: Vec<std::ops::Range<usize>> = Vec::with_capacity(widened.len());
        for r in widened {
            match pages.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => pages.push(r),
            }
        }
        for r in &pages {
            self.replace_with_copy(r.clone())?;
        }
        let mut at = 0;
        for r in pages.iter().chain(std::iter::once(&(self.len..self.len))) {
            if r.start > at {
                self.blank(at..r.start)?;
            }
            at = at.max(r.end);
        }
        Ok(())
    }

    /// Replaces the (page-aligned) range with a private, read-only copy of its bytes.
    fn replace_with_copy(&self, r: std::ops::Range<usize>) -> io::Result<()> {
        let len = r.len();
        // SAFETY: a fresh private anonymous mapping chosen by the kernel aliases nothing.
        let copy = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if copy == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: (1) the source range lies inside this live mapping (`detach` clamps
        // to `len`) and the destination is the fresh `len`-byte mapping above, so the two
        // cannot overlap; (2) the bytes of records the consumer still holds do not change
        // (the producer writes only released space); bytes around them on the same pages
        // may be written by the producer meanwhile, and those copies are never read.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.add(r.start).as_ptr(), copy.cast(), len);
        }
        let target = self.ptr.as_ptr().wrapping_add(r.start);
        // SAFETY: `copy` is our mapping of `len` bytes; mprotect only drops write access.
        // Then mremap moves it over the target pages, which lie inside this mapping:
        // the kernel swaps the page-table entries under its mmap lock, so a thread
        // reading a zero-copy buffer there sees the old or the new page, and both hold
        // the same bytes. On failure the copy is unmapped and the target left as it was.
        let moved = unsafe {
            libc::mprotect(copy, len, libc::PROT_READ);
            libc::mremap(
                copy,
                len,
                len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                target.cast::<libc::c_void>(),
            )
        };
        if moved == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: `copy` is still our own mapping of `len` bytes.
            unsafe { libc::munmap(copy, len) };
            return Err(e);
        }
        Ok(())
    }

    /// Maps inaccessible anonymous memory over the (page-aligned) range: nothing there
    /// may be read any more, and the segment's pages are no longer mapped there.
    fn blank(&self, r: std::ops::Range<usize>) -> io::Result<()> {
        let target = self.ptr.as_ptr().wrapping_add(r.start);
        // SAFETY: the range lies inside this mapping and holds no record anyone still
        // reads (`detach` keeps those), so no Rust reference points into it.
        let p = unsafe {
            libc::mmap(
                target.cast(),
                r.len(),
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned, and no reference into the
        // mapping outlives `self` (zero-copy buffers hold an Arc to their owner, which
        // owns this mapping, so this runs only after the last buffer is gone).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Owners of zero-copy buffers: an object that keeps a [`Mapping`] alive and releases
/// its ring space when dropped.
///
/// Implementations must return the same mapping on every call.
pub(crate) trait HoldsMapping: Allocation {
    fn mapping(&self) -> &Mapping;
}

/// Builds an Arrow [`Buffer`] over `len` bytes of `owner`'s mapping at `offset`,
/// without copying. The buffer keeps `owner` alive; dropping the last buffer (and
/// every slice of it) drops `owner`. `None` if the range is out of bounds.
pub(crate) fn zero_copy_buffer<O: HoldsMapping + 'static>(
    owner: Arc<O>,
    offset: usize,
    len: usize,
) -> Option<Buffer> {
    let mapping = owner.mapping();
    let end = offset.checked_add(len)?;
    if end > mapping.len {
        return None;
    }
    // SAFETY: offset <= len of the live mapping, so the pointer is in bounds (or one past
    // the end for an empty buffer) and non-null.
    let ptr = unsafe { mapping.ptr.add(offset) };
    let owner: Arc<dyn Allocation> = owner;
    // SAFETY: (1) `ptr` is valid for reads of `len` bytes: the range is inside the
    // mapping, and the mapping is owned (through `owner`, by the HoldsMapping contract)
    // by the Arc the buffer keeps, so it outlives every clone and slice; (2) the bytes
    // do not change while the buffer lives: the producer only writes space the consumer
    // has released, and this range is released only when `owner` drops. A hostile peer
    // breaking that protocol can change the values we read, but in its own mapping, so
    // it can garble data, which Arrow validated on import, not this process's memory
    // safety beyond what any shared-memory transport accepts.
    Some(unsafe { Buffer::from_custom_allocation(ptr, len, owner) })
}

/// Blocks until `word` is woken, no longer equals `expected`, or `timeout` passes
/// (spurious wake-ups are possible; callers re-check their condition).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `word` is a valid, aligned 32-bit atomic that lives for the call (in the
    // shared mapping, hence the non-private futex op); `ts` is a valid relative timeout.
    // EAGAIN (value changed), ETIMEDOUT and EINTR all mean "re-check", so the result
    // is deliberately ignored.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every waiter (in any process) blocked on `word`.
pub(crate) fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned 32-bit atomic; FUTEX_WAKE only reads its address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Watches whether another process is alive.
///
/// Prefers a pidfd: it names the process itself (no pid-reuse race after opening) and
/// becomes readable as soon as the process terminates, zombie or not. `kill(pid, 0)`,
/// the fallback on kernels without pidfd_open, still succeeds on an unreaped zombie.
#[derive(Debug)]
pub(crate) struct ProcessWatch {
    pid: u32,
    pidfd: Option<OwnedFd>,
    /// pidfd_open said ESRCH: the process was already gone (possibly an unreaped zombie).
    gone_at_open: bool,
}

impl ProcessWatch {
    pub(crate) fn new(pid: u32) -> Self {
        let Ok(raw_pid) = libc::pid_t::try_from(pid) else {
            return Self {
                pid,
                pidfd: None,
                gone_at_open: true,
            };
        };
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw_pid, 0) };
        let gone_at_open = fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        let pidfd = match libc::c_int::try_from(fd) {
            // SAFETY: a non-negative return is a fresh descriptor owned by nobody else.
            Ok(fd) if fd >= 0 => Some(unsafe { OwnedFd::from_raw_fd(fd) }),
            _ => None,
        };
        Self {
            pid,
            pidfd,
            gone_at_open,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits up to `timeout` for the process to end; true when it has. A peer whose
    /// socket just closed may still be between closing its files and exiting.
    pub(crate) fn wait_gone(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if !self.is_alive() {
                return true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            if let Some(fd) = &self.pidfd {
                let mut pfd = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
                // SAFETY: `pfd` is one valid pollfd; the timeout bounds the wait.
                unsafe { libc::poll(&mut pfd, 1, ms) };
            } else {
                std::thread::sleep(left.min(Duration::from_millis(5)));
            }
        }
    }

    pub(crate) fn is_alive(&self) -> bool {
        let Ok(raw_pid) = libc::pid_t::try_from(self.pid) else {
            return false;
        };
        if raw_pid <= 0 || self.gone_at_open {
            return false;
        }
        if let Some(fd) = &self.pidfd {
            let mut pfd = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one valid pollfd; a zero timeout never blocks.
            let n = unsafe { libc::poll(&mut pfd, 1, 0) };
            return !(n > 0 && pfd.revents & libc::POLLIN != 0);
        }
        // SAFETY: signal 0 performs only the existence and permission check.
        let ret = unsafe { libc::kill(raw_pid, 0) };
        ret == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

/// The pid of the process at the other end of a connected Unix socket, as the kernel
/// recorded it at connect time (`SO_PEERCRED`); it stays readable after the peer closed.
pub(crate) fn peer_pid(stream: &std::os::unix::net::UnixStream) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::ucred>()).ok()?;
    // SAFETY: `cred` is a writable ucred and `len` its size; the descriptor is a socket
    // the caller keeps open for the call.
    let ret = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::addr_of_mut!(cred).cast(),
            &mut len,
        )
    };
    (ret == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// The flag that lets arrow's IPC decoder build arrays without validating them, for
/// [`codec`](crate::codec) to validate each batch itself right after, before anything
/// reads a value: arrow checks a string view's UTF-8 with one `from_utf8` call per
/// value, a tenth of the executor's time on TPC-H Q1, where the codec checks the
/// inline ASCII views (almost all of TPC-H's short strings) with one mask test each.
pub(crate) fn deferred_validation() -> arrow_data::UnsafeFlag {
    let mut flag = arrow_data::UnsafeFlag::new();
    // SAFETY: arrays decoded under this flag are unchecked only until
    // `codec::validate_batch` runs on the batch, which the decoder does before it
    // returns the batch (an error drops it): the same checks as arrow's
    // `validate_full` (buffer sizes, null counts, offsets, dictionary keys, view
    // bounds, UTF-8), so no unvalidated array reaches a caller.
    unsafe { flag.set(true) };
    flag
}

/// Whether a connection kept idle is still open: no end of stream (and nothing
/// unasked for) waiting on it. Does not block.
pub(crate) fn still_open(stream: &std::os::unix::net::UnixStream) -> bool {
    let peeked = recv_with(stream, &mut [0u8], libc::MSG_PEEK | libc::MSG_DONTWAIT);
    matches!(peeked, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// Reads what `stream` holds now into `buf`, without blocking: `WouldBlock` when
/// nothing has arrived.
pub(crate) fn recv_now(
    stream: &std::os::unix::net::UnixStream,
    buf: &mut [u8],
) -> io::Result<usize> {
    recv_with(stream, buf, libc::MSG_DONTWAIT)
}

/// `recv(2)` into `buf` with `flags`.
fn recv_with(
    stream: &std::os::unix::net::UnixStream,
    buf: &mut [u8],
    flags: libc::c_int,
) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length, the length given; the descriptor is a
    // socket the caller keeps open for the call.
    let ret = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            flags,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// Waits until `fd` has something to read (or its peer hung up), at most `timeout`
/// (`None`: without end). `false` when the time ran out.
///
/// Why `poll` rather than a blocking read: a thread blocked in `recv` on a Unix stream
/// socket is woken each time its peer reads what this socket sent (the kernel's
/// "write space" wake-up knows no reader from writer), so a request-answer exchange
/// woke each side once for nothing: a context switch and a cross-CPU interrupt on
/// both, per request. A `poll` for `POLLIN` sleeps through those wake-ups.
pub fn wait_readable(
    fd: std::os::fd::BorrowedFd<'_>,
    timeout: Option<Duration>,
) -> io::Result<bool> {
    let millis = match timeout {
        None => -1,
        // Rounded up: a wait of 0.3 ms must not become a busy poll of 0 ms.
        Some(t) => {
            libc::c_int::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(libc::c_int::MAX)
        }
    };
    let mut entry = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: `entry` is one valid pollfd, the count given; the descriptor is
        // borrowed for the call.
        let ret = unsafe { libc::poll(&mut entry, 1, millis) };
        if ret >= 0 {
            return Ok(ret > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A new inotify instance, non-blocking and closed on exec.
pub(crate) fn inotify_init() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; a non-negative return is a new descriptor we then own.
    let fd = check(unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) })?;
    // SAFETY: `fd` was just returned by the kernel and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Watches `path` for the events in `mask` on `inotify`; the watch descriptor (the same
/// one again for an inode already watched).
pub(crate) fn inotify_add_watch(
    inotify: std::os::fd::BorrowedFd<'_>,
    path: &std::path::Path,
    mask: u32,
) -> io::Result<i32> {
    use std::os::unix::ffi::OsStrExt;
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `cpath` is a valid NUL-terminated string for the call; the descriptor is
    // borrowed for it.
    check(unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), cpath.as_ptr(), mask) })
}

/// Removes the watch `wd` from `inotify` (its `IN_IGNORED` event follows).
pub(crate) fn inotify_rm_watch(inotify: std::os::fd::BorrowedFd<'_>, wd: i32) -> io::Result<()> {
    // SAFETY: no pointers; the descriptor is borrowed for the call.
    check(unsafe { libc::inotify_rm_watch(inotify.as_raw_fd(), wd) }).map(drop)
}
