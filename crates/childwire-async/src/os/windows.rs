//! The Win32 calls behind [`super::Tracking`] on Windows: the job object
//! that holds a child's tree, starting the child inside it, the console
//! break, and waiting for the exit. The FFI of this crate on Windows, hence
//! `unsafe` (each call says why it is sound).
#![allow(unsafe_code)]

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::time::Duration;

use windows_sys::Win32::Foundation::{
    ERROR_MORE_DATA, FALSE, HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::Storage::FileSystem::{FILE_TYPE_CHAR, FILE_TYPE_DISK, GetFileType};
use windows_sys::Win32::System::Console::{
    CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent, GetConsoleWindow,
};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_PROCESS_ID_LIST, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectBasicProcessIdList, JobObjectExtendedLimitInformation, QueryInformationJobObject,
    SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, CREATE_SUSPENDED, GetExitCodeProcess, INFINITE,
    OpenProcess, OpenThread, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SET_QUOTA,
    PROCESS_SYNCHRONIZE, PROCESS_TERMINATE, QueryFullProcessImageNameW, ResumeThread,
    THREAD_SUSPEND_RESUME, TerminateProcess, WaitForSingleObject,
};

/// The exit code of what childwire terminates: 1, as `std`'s
/// `Child::kill`, libuv (Node) and Go use, so a killed child reads the same
/// whoever killed it. The report names the step (SIGKILL) beside it.
pub(crate) const KILLED_EXIT_CODE: u32 = 1;

/// The creation flags of every child: created suspended (it runs its first
/// instruction only once it is in its job, so nothing it starts can be
/// outside), leading a console process group of its own when `group` (the
/// target of `CTRL_BREAK_EVENT`), and without a console window of its own
/// when the host has no console to share (a GUI host would otherwise flash
/// a console window for every server; such a host cannot send the break
/// anyway).
pub(crate) fn creation_flags(group: bool) -> u32 {
    let mut flags = CREATE_SUSPENDED;
    if group {
        flags |= CREATE_NEW_PROCESS_GROUP;
    }
    // SAFETY: no arguments; it only reads the calling process's console.
    if unsafe { GetConsoleWindow() }.is_null() {
        flags |= CREATE_NO_WINDOW;
    }
    flags
}

/// Whether this process's stderr is a console or a file, where a write
/// finishes on its own; a write to a pipe waits for the pipe's reader, who
/// may never read (Windows cannot ask a pipe whether a write would wait).
pub(crate) fn stderr_is_console_or_file() -> bool {
    let handle = std::io::stderr().as_raw_handle();
    // SAFETY: it only asks the kind of the handle; a closed or null one is
    // `FILE_TYPE_UNKNOWN`.
    let kind = unsafe { GetFileType(handle) };
    kind == FILE_TYPE_CHAR || kind == FILE_TYPE_DISK
}

/// A job object that ends everything in it when its last handle closes.
/// Its one handle is this value's, not inheritable: when the host dies,
/// however it dies, the handle closes and the whole tree ends.
#[derive(Debug)]
pub(crate) struct Job(OwnedHandle);

impl Job {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: null attributes (a handle that is not inherited, default
        // security) and a null name (an anonymous job) are allowed.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a valid handle just created, owned by nothing else.
        let job = Self(unsafe { OwnedHandle::from_raw_handle(raw) });
        // SAFETY: the all-zero bit pattern is a valid value of this plain
        // C struct (integers only).
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: the pointer and size describe `limits`, the struct this
        // information class takes; it is only read.
        let set = unsafe {
            SetInformationJobObject(
                job.raw(),
                JobObjectExtendedLimitInformation,
                (&raw const limits).cast(),
                size_of_u32::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>(),
            )
        };
        if set == FALSE {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }

    fn raw(&self) -> HANDLE {
        self.0.as_raw_handle()
    }

    /// Puts `process` (still suspended) in the job.
    pub(crate) fn assign(&self, process: &Process) -> io::Result<()> {
        // SAFETY: both handles are open for as long as the borrows; the
        // process handle has PROCESS_SET_QUOTA and PROCESS_TERMINATE.
        check(unsafe { AssignProcessToJobObject(self.raw(), process.raw()) })
    }

    /// Ends every process in the job (the whole tree: none can leave it).
    pub(crate) fn terminate(&self) -> io::Result<()> {
        // SAFETY: a job handle with all access, open for the borrow.
        check(unsafe { TerminateJobObject(self.raw(), KILLED_EXIT_CODE) })
    }

    /// The IDs of the processes in the job that are alive, console hosts
    /// left out: a child with a console of its own (one started by a host
    /// without a console) gets a `conhost.exe`, which Windows (and Wine)
    /// put in its job, but which is no process the child started.
    pub(crate) fn members(&self) -> io::Result<Vec<u32>> {
        Ok(self
            .process_ids()?
            .into_iter()
            .filter(|&pid| !is_console_host(pid))
            .collect())
    }

    fn process_ids(&self) -> io::Result<Vec<u32>> {
        // The list's header (two u32) is as large as `HEADER` usizes.
        const HEADER: usize = 8 / std::mem::size_of::<usize>();
        let mut room = 64;
        loop {
            let mut buf = vec![0usize; HEADER + room];
            let bytes = u32::try_from(std::mem::size_of_val(buf.as_slice())).unwrap_or(u32::MAX);
            // SAFETY: `buf` is `bytes` long and aligned for the struct this
            // information class fills (usize-aligned, a header then usizes);
            // the returned length may be null.
            let ok = unsafe {
                QueryInformationJobObject(
                    self.raw(),
                    JobObjectBasicProcessIdList,
                    buf.as_mut_ptr().cast(),
                    bytes,
                    std::ptr::null_mut(),
                )
            };
            let more = ok == FALSE
                && io::Error::last_os_error().raw_os_error() == Some(ERROR_MORE_DATA as i32);
            if ok == FALSE && !more {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `buf` starts with the header the call filled (or
            // zeroes), and is aligned for it.
            let header = unsafe { &*buf.as_ptr().cast::<JOBOBJECT_BASIC_PROCESS_ID_LIST>() };
            let (assigned, listed) = (
                header.NumberOfAssignedProcesses as usize,
                header.NumberOfProcessIdsInList as usize,
            );
            if more || listed < assigned {
                // Started since: ask again with room for them.
                room = assigned.max(room) + 16;
                continue;
            }
            return Ok(buf
                .iter()
                .skip(HEADER)
                .take(listed)
                .filter_map(|&pid| u32::try_from(pid).ok())
                .collect());
        }
    }
}

/// The child's process, through a handle of our own: it names this
/// process and no other, even after the runtime's child type let go of
/// its handle and the PID was recycled.
#[derive(Debug)]
pub(crate) struct Process(OwnedHandle);

impl Process {
    /// Opens `pid`, with the rights the job and the waits need. Only for a
    /// PID the runtime's child type still holds a handle to: then the PID
    /// cannot have been recycled yet.
    pub(crate) fn open(pid: u32) -> io::Result<Self> {
        let rights = PROCESS_SET_QUOTA
            | PROCESS_TERMINATE
            | PROCESS_SYNCHRONIZE
            | PROCESS_QUERY_LIMITED_INFORMATION;
        // SAFETY: plain values; the handle is not inheritable.
        let raw = unsafe { OpenProcess(rights, FALSE, pid) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a valid handle just opened, owned by nothing else.
        Ok(Self(unsafe { OwnedHandle::from_raw_handle(raw) }))
    }

    fn raw(&self) -> HANDLE {
        self.0.as_raw_handle()
    }

    /// Ends this process alone (it is not in its job yet).
    fn terminate(&self) -> io::Result<()> {
        // SAFETY: a handle with PROCESS_TERMINATE, open for the borrow.
        check(unsafe { TerminateProcess(self.raw(), KILLED_EXIT_CODE) })
    }

    /// Whether the process has exited.
    pub(crate) fn exited(&self) -> bool {
        matches!(self.wait(Duration::ZERO), Ok(Some(_)))
    }

    /// Waits up to `limit` for the process to exit: its exit code, or
    /// `None` if it is still running.
    pub(crate) fn wait(&self, limit: Duration) -> io::Result<Option<u32>> {
        // Rounded up, so that a short wait is not a poll; never INFINITE.
        let ms = limit
            .as_nanos()
            .div_ceil(1_000_000)
            .min(u128::from(INFINITE - 1));
        let ms = u32::try_from(ms).unwrap_or(INFINITE - 1);
        // SAFETY: a handle with SYNCHRONIZE, open for the borrow.
        match unsafe { WaitForSingleObject(self.raw(), ms) } {
            WAIT_OBJECT_0 => {}
            WAIT_TIMEOUT => return Ok(None),
            _ => return Err(io::Error::last_os_error()),
        }
        let mut code = 0u32;
        // SAFETY: a handle with PROCESS_QUERY_LIMITED_INFORMATION, and a
        // valid place for the code.
        check(unsafe { GetExitCodeProcess(self.raw(), &raw mut code) })?;
        Ok(Some(code))
    }
}

/// Starts the child `pid`, spawned suspended: opens it, puts it in `job`
/// and resumes it. Every way out leaves it running in its job or ended:
/// - it cannot be opened (only if the system is out of resources): it is
///   resumed outside the job, so it is not left frozen; the failed spawn
///   drops its pipes and it sees its stdin close;
/// - it cannot be put in the job (the host's own job forbids nesting): it is
///   terminated before it ran anything;
/// - it cannot be resumed: the job is terminated.
pub(crate) fn start(pid: u32, job: &Job) -> io::Result<Process> {
    let process = match Process::open(pid) {
        Ok(process) => process,
        Err(err) => {
            let _ = resume_threads(pid);
            return Err(context("could not open the child process", &err));
        }
    };
    if let Err(err) = job.assign(&process) {
        let _ = process.terminate();
        return Err(context(
            "could not put the child in a job object; it was ended",
            &err,
        ));
    }
    match resume_threads(pid) {
        Ok(resumed) if resumed > 0 => Ok(process),
        result => {
            let _ = job.terminate();
            let err = result
                .err()
                .unwrap_or_else(|| io::Error::other("no thread found"));
            Err(context("could not resume the child; it was ended", &err))
        }
    }
}

/// Whether process `pid` runs `conhost.exe` (the console host). A process
/// that cannot be asked is counted as not one.
fn is_console_host(pid: u32) -> bool {
    // SAFETY: plain values; the handle is not inheritable.
    let raw = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid) };
    if raw.is_null() {
        return false;
    }
    // SAFETY: a valid handle just opened, owned by nothing else.
    let process = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut name = [0u16; 1024];
    let mut len = u32::try_from(name.len()).unwrap_or(u32::MAX);
    // SAFETY: a handle with PROCESS_QUERY_LIMITED_INFORMATION; `name` has
    // room for `len` UTF-16 units, and `len` receives how many were written.
    let ok = unsafe {
        QueryFullProcessImageNameW(process.as_raw_handle(), 0, name.as_mut_ptr(), &raw mut len)
    };
    if ok == FALSE {
        return false;
    }
    let path = String::from_utf16_lossy(name.get(..len as usize).unwrap_or_default());
    path.rsplit(['\\', '/'])
        .next()
        .is_some_and(|file| file.eq_ignore_ascii_case("conhost.exe"))
}

/// Resumes every thread of process `pid` (a process created suspended has
/// one, its main thread); how many.
///
/// `std` closes the main thread's handle as soon as the process is created,
/// so the threads are found through a Toolhelp snapshot, the documented way
/// to list them (the undocumented `NtResumeProcess` would do it in one
/// call); Wine implements both.
fn resume_threads(pid: u32) -> io::Result<usize> {
    // SAFETY: plain values; the process ID is ignored for thread snapshots.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw == INVALID_HANDLE_VALUE || raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a valid handle just created, owned by nothing else.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: the all-zero bit pattern is a valid value of this plain C
    // struct (integers only); `dwSize` is set as the API requires.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = size_of_u32::<THREADENTRY32>();
    let mut resumed = 0;
    // SAFETY: a snapshot handle, and `entry` with its size set.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle(), &raw mut entry) } != FALSE;
    while more {
        if entry.th32OwnerProcessID == pid {
            resume_thread(entry.th32ThreadID)?;
            resumed += 1;
        }
        // SAFETY: as for `Thread32First`.
        more = unsafe { Thread32Next(snapshot.as_raw_handle(), &raw mut entry) } != FALSE;
    }
    Ok(resumed)
}

fn resume_thread(tid: u32) -> io::Result<()> {
    // SAFETY: plain values; the handle is not inheritable.
    let raw = unsafe { OpenThread(THREAD_SUSPEND_RESUME, FALSE, tid) };
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a valid handle just opened, owned by nothing else.
    let thread = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: a handle with THREAD_SUSPEND_RESUME, open for the call.
    if unsafe { ResumeThread(thread.as_raw_handle()) } == u32::MAX {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `CTRL_BREAK_EVENT` to console process group `group`: the child's
/// PID, when it was created with `CREATE_NEW_PROCESS_GROUP`. Fails when the
/// host has no console (the break only reaches processes sharing it).
pub(crate) fn ctrl_break(group: u32) -> io::Result<()> {
    // SAFETY: plain values. `group` is a group this host created and whose
    // leader it still holds (the caller checked it is alive), so the break
    // reaches that group only.
    check(unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, group) })
}

/// A Win32 `BOOL` result as a `Result`.
fn check(ok: windows_sys::core::BOOL) -> io::Result<()> {
    if ok == FALSE {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn context(what: &str, err: &io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{what}: {err}"))
}

/// The size of a Win32 struct, as the `u32` the API takes.
fn size_of_u32<T>() -> u32 {
    u32::try_from(std::mem::size_of::<T>()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::os::windows::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    use super::*;

    /// `cmd.exe` created as childwire creates children (suspended, in a
    /// group), with stdin piped: `cmd.exe` without `/c` waits on it.
    fn suspended_cmd(args: &[&str]) -> std::process::Child {
        Command::new("cmd.exe")
            .args(args)
            .creation_flags(creation_flags(true))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cmd.exe runs")
    }

    #[test]
    fn a_suspended_child_runs_only_once_started_in_its_job() {
        let job = Job::new().unwrap();
        let mut child = suspended_cmd(&["/d", "/c", "exit 7"]);
        let early = Process::open(child.id()).unwrap();
        // Suspended: it cannot have run `exit 7` yet.
        assert_eq!(early.wait(Duration::from_millis(300)).unwrap(), None);
        let process = start(child.id(), &job).unwrap();
        assert_eq!(process.wait(Duration::from_secs(20)).unwrap(), Some(7));
        assert!(process.exited());
        assert_eq!(child.wait().unwrap().code(), Some(7));
    }

    #[test]
    fn terminating_the_job_ends_the_child_and_what_it_started() {
        let job = Job::new().unwrap();
        // The outer cmd.exe runs an inner one, which waits on the stdin
        // both share.
        let mut child = suspended_cmd(&["/d", "/c", "cmd.exe /d"]);
        let process = start(child.id(), &job).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let members = loop {
            let members = job.members().unwrap();
            if members.len() >= 2 || Instant::now() > deadline {
                break members;
            }
            std::thread::yield_now();
        };
        assert_eq!(members.len(), 2, "{members:?}");
        assert!(members.contains(&child.id()));
        let inner = members.iter().find(|&&pid| pid != child.id()).copied();
        let inner = Process::open(inner.unwrap()).unwrap();
        assert!(!process.exited());

        job.terminate().unwrap();
        let code = Some(KILLED_EXIT_CODE);
        assert_eq!(process.wait(Duration::from_secs(20)).unwrap(), code);
        assert_eq!(inner.wait(Duration::from_secs(20)).unwrap(), code);
        assert_eq!(job.members().unwrap(), Vec::<u32>::new());
        let _ = child.wait();
    }

    #[test]
    fn closing_the_job_ends_what_is_in_it() {
        let job = Job::new().unwrap();
        let mut child = suspended_cmd(&["/d"]);
        let process = start(child.id(), &job).unwrap();
        assert_eq!(process.wait(Duration::from_millis(200)).unwrap(), None);
        // The host's handle was the job's only one (as when the host dies).
        drop(job);
        assert!(process.wait(Duration::from_secs(20)).unwrap().is_some());
        let _ = child.wait();
    }
}
