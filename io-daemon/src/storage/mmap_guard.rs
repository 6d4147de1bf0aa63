//! Read-only file mappings that survive the file being truncated under them. All of the
//! crate's `unsafe` code lives here.
//!
//! A page of a `MAP_SHARED` file mapping that lies past the file's current end raises
//! SIGBUS when touched, and SIGBUS kills the process: another process truncating a file
//! the daemon is scanning would take the daemon down. So every [`Mapping`] is entered in
//! a fixed-size, lock-free registry, and a process-wide SIGBUS handler (installed once)
//! looks the faulting address up in it:
//!
//! - inside a registered mapping: it maps an anonymous zero page over the faulting page,
//!   marks that mapping *poisoned* and returns, so the faulting load retries and reads
//!   zeros. Readers check [`Mapping::poisoned`] (and the file's size) after decoding and
//!   turn a poisoned mapping into an error: zeros never reach a result.
//! - anywhere else: it passes the signal on to the handler installed before it (the Rust
//!   runtime's stack-overflow handler, usually), or restores the default action and
//!   returns, so the fault happens again and kills the process as it would have.
//!
//! The handler only loads and stores atomics in static memory and makes the `mmap` and
//! `sigaction` system calls: no allocation, no lock.

use std::fs::File;
use std::io;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

use memmap2::{Mmap, MmapOptions};

/// Mappings alive at once at most; [`Mapping::map`] fails beyond (the caller falls back
/// to positional reads). A scan maps only the files it has planned and not finished.
pub(crate) const MAX_MAPPINGS: usize = 1024;

const FREE: u8 = 0;
const CLAIMED: u8 = 1;

/// One registry entry. `start == 0` means "no live range" to the handler.
struct Slot {
    state: AtomicU8,
    start: AtomicUsize,
    len: AtomicUsize,
    poisoned: AtomicBool,
}

impl Slot {
    const fn new() -> Self {
        Self {
            state: AtomicU8::new(FREE),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }
}

static REGISTRY: [Slot; MAX_MAPPINGS] = [const { Slot::new() }; MAX_MAPPINGS];
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The SIGBUS action in place before ours (written once, before ours is installed).
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
/// Whether installing the handler worked (the OS error code if not).
static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();

/// Installs the SIGBUS handler, once per process.
fn install() -> io::Result<()> {
    let result = INSTALLED.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page)
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        PAGE_SIZE.store(page, Ordering::Relaxed);
        // SAFETY: an all-zero sigaction is a valid value (no handler, empty mask).
        let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one into `previous`, a valid
        // out pointer.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) } != 0 {
            return Err(io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        // Published before our handler can run: it reads PREVIOUS.
        let _ = PREVIOUS.set(previous);
        // SAFETY: as above, all-zero is a valid sigaction to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
        // SA_ONSTACK: a handler we chain to (Rust's stack-overflow handler) expects the
        // alternate stack where the thread has one; without one the flag is ignored.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `action.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialised and `on_sigbus` has the SA_SIGINFO
        // signature; the old action is not asked for (it was read above).
        if unsafe { libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        Ok(())
    });
    result.map_err(|code| {
        io::Error::new(
            io::Error::from_raw_os_error(code).kind(),
            format!(
                "cannot install the SIGBUS handler that guards mapped files: {}",
                io::Error::from_raw_os_error(code)
            ),
        )
    })
}

/// The SIGBUS handler (see the module documentation). Async-signal-safe: atomics in
/// static memory and two system calls.
extern "C" fn on_sigbus(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE_SIZE.load(Ordering::Relaxed);
    for slot in &REGISTRY {
        // Acquire pairs with the Release store of `start` in `Mapping::map`: `len` and the
        // reset `poisoned` written before it are visible.
        let start = slot.start.load(Ordering::Acquire);
        if start == 0 {
            continue;
        }
        let len = slot.len.load(Ordering::Relaxed);
        // Re-read: a slot being torn down or reused between the two loads is skipped.
        if addr < start || addr - start >= len || slot.start.load(Ordering::Acquire) != start {
            continue;
        }
        let page_start = addr & !(page - 1);
        // SAFETY: `page_start..page_start + page` lies inside a live, registered, read-only
        // mapping (mappings start page-aligned; the kernel rounds a mapping's end up to a
        // page): replacing that page with a read-only zero page changes what readers of
        // the mapping see (zeros, which the poisoned flag tells them to discard) and
        // nothing else. munmap of the whole mapping later removes this page too.
        let mapped = unsafe {
            libc::mmap(
                page_start as *mut c_void,
                page,
                libc::PROT_READ,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mapped != libc::MAP_FAILED {
            // Release pairs with the Acquire load in `Mapping::poisoned`.
            slot.poisoned.store(true, Ordering::Release);
            return;
        }
        break;
    }
    chain(sig, info, context);
}

/// Not one of ours: the previous handler, or the default action (the fault re-raises).
fn chain(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    if let Some(previous) = PREVIOUS.get() {
        let handler = previous.sa_sigaction;
        if handler != libc::SIG_DFL && handler != libc::SIG_IGN {
            if previous.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: with SA_SIGINFO the previous handler has this signature; we pass
                // it the arguments the kernel passed us.
                let f = unsafe {
                    std::mem::transmute::<
                        libc::sighandler_t,
                        extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
                    >(handler)
                };
                f(sig, info, context);
            } else {
                // SAFETY: without SA_SIGINFO the previous handler takes the signal number.
                let f = unsafe {
                    std::mem::transmute::<libc::sighandler_t, extern "C" fn(c_int)>(handler)
                };
                f(sig);
            }
            return;
        }
    }
    // SAFETY: an all-zero sigaction with SIG_DFL (0) is the default action.
    let mut default: libc::sigaction = unsafe { std::mem::zeroed() };
    default.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `default` is a valid action; sigaction is async-signal-safe. Returning
    // then re-executes the faulting access, which now kills the process with SIGBUS.
    unsafe { libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut()) };
}

/// A registry slot held by one mapping; unregisters on drop.
#[derive(Debug)]
struct Registration {
    index: usize,
}

impl Registration {
    fn claim() -> Option<Self> {
        // Build the guard only for the slot won: a `Registration` dropped for a slot that
        // was lost would free another mapping's slot (found by `then_some`, which
        // evaluates eagerly: concurrent scans then died of SIGBUS).
        REGISTRY.iter().enumerate().find_map(|(index, slot)| {
            slot.state
                .compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
                .then(|| Self { index })
        })
    }

    fn slot(&self) -> &'static Slot {
        &REGISTRY[self.index]
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let slot = self.slot();
        // The range first: from here on the handler ignores this slot.
        slot.start.store(0, Ordering::Release);
        slot.len.store(0, Ordering::Relaxed);
        // Release pairs with the Acquire compare_exchange in `claim`.
        slot.state.store(FREE, Ordering::Release);
    }
}

/// A read-only, registered mapping of a whole file (as long as it was when mapped).
pub(crate) struct Mapping {
    // Field order matters: the registration drops (unregisters) before the map is
    // unmapped, so the handler never matches an address that may be mapped again by
    // someone else. Nobody reads the mapping by then (it is being dropped).
    registration: Registration,
    map: Mmap,
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("len", &self.map.len())
            .field("poisoned", &self.poisoned())
            .finish()
    }
}

impl Mapping {
    /// Maps the first `len` bytes (at least 1) of `file` read-only and registers them
    /// with the SIGBUS handler. Fails when the handler cannot be installed, the registry
    /// is full ([`MAX_MAPPINGS`]) or `mmap` fails.
    pub(crate) fn map(file: &File, len: usize) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an empty file cannot be mapped",
            ));
        }
        install()?;
        let registration = Registration::claim().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("more than {MAX_MAPPINGS} files mapped at once"),
            )
        })?;
        // SAFETY: the mapping is read-only and private to this process. The hazard of a
        // file mapping, the file shrinking under it (SIGBUS), is what the handler covers:
        // the range is registered below, before any byte of it is read, and stays
        // registered until the mapping is unmapped. Bytes changing under the map (a file
        // rewritten in place) are no different from positional reads of a changing file.
        let map = unsafe { MmapOptions::new().len(len).map(file) }?;
        let slot = registration.slot();
        slot.poisoned.store(false, Ordering::Relaxed);
        slot.len.store(map.len(), Ordering::Relaxed);
        // Release pairs with the handler's Acquire load of `start`.
        slot.start.store(map.as_ptr() as usize, Ordering::Release);
        Ok(Self { registration, map })
    }

    /// Whether a read hit a page past the file's end (and read zeros).
    pub(crate) fn poisoned(&self) -> bool {
        // Acquire pairs with the handler's Release store.
        self.registration.slot().poisoned.load(Ordering::Acquire)
    }
}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_slots_are_released() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, [1u8; 10]).expect("write");
        let file = File::open(&path).expect("open");
        // More than the registry holds, one after the other: each drop frees its slot.
        for _ in 0..MAX_MAPPINGS + 10 {
            let m = Mapping::map(&file, 10).expect("map");
            assert_eq!(m.as_ref(), &[1u8; 10]);
            assert!(!m.poisoned());
        }
        assert!(Mapping::map(&file, 0).is_err());
    }

    /// Regression: claiming a slot freed every slot tried before it, so a mapping
    /// opened after another left the first unregistered (and a truncation under it
    /// killed the process).
    #[test]
    fn claiming_a_slot_leaves_the_others_registered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, [1u8; 10]).expect("write");
        let file = File::open(&path).expect("open");
        let first = Mapping::map(&file, 10).expect("map");
        let others: Vec<Mapping> = (0..8)
            .map(|_| Mapping::map(&file, 10).expect("map"))
            .collect();
        for m in std::iter::once(&first).chain(&others) {
            let slot = m.registration.slot();
            assert_eq!(slot.start.load(Ordering::Acquire), m.map.as_ptr() as usize);
            assert_eq!(slot.state.load(Ordering::Acquire), CLAIMED);
        }
    }

    const CHILD: &str = "RINGSCAN_FOREIGN_SIGBUS_CHILD";

    /// The handler must not swallow faults outside its mappings: a SIGBUS in a mapping
    /// it does not know still kills the process (checked in a child process, this test
    /// binary run again for this test alone).
    #[test]
    fn a_foreign_sigbus_still_kills_the_process() {
        use std::os::unix::process::ExitStatusExt as _;
        use std::process::{Command, Stdio};

        if std::env::var_os(CHILD).is_some() {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            std::fs::write(&path, vec![1u8; 3 * 4096]).expect("write");
            let file = File::open(&path).expect("open");
            let ours = Mapping::map(&file, 3 * 4096).expect("map: installs the handler");
            // SAFETY: a test of exactly the hazard: this map is not registered.
            let foreign = unsafe { Mmap::map(&file) }.expect("map");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|w| w.set_len(10))
                .expect("truncate");
            let byte = std::hint::black_box(&foreign[2 * 4096]);
            // Not reached: the load above dies of SIGBUS.
            println!("survived, read {byte}");
            drop(ours);
            std::process::exit(0);
        }
        let exe = std::env::current_exe().expect("test binary");
        let status = Command::new(exe)
            .args([
                "--exact",
                "storage::mmap_guard::tests::a_foreign_sigbus_still_kills_the_process",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run the child");
        assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
    }
}
