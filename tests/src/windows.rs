//! Whether a process runs, asked of Windows (which has no `/proc`).

// The workspace denies unsafe code; these two calls into kernel32 are what std does not offer
// (asking about a process by its ID), each with its SAFETY note.
#![allow(unsafe_code)]

use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

/// Process `pid` exists and has not exited.
///
/// Windows keeps an exited process's object (and so its ID) while anyone holds a handle to it;
/// its exit code then says it is gone. A process that exits with code 259 (`STILL_ACTIVE`)
/// would look alive: nothing the suite starts does.
pub(crate) fn running(pid: u32) -> bool {
    // SAFETY: plain integers in; the handle returned is ours and closed below.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        // No such process (or one we may not query: the suite starts none of those).
        return false;
    }
    let mut code = 0u32;
    // SAFETY: `handle` is a valid process handle with query rights; `code` outlives the call.
    let asked = unsafe { GetExitCodeProcess(handle, &mut code) };
    // SAFETY: closing the handle OpenProcess gave us, once.
    unsafe { CloseHandle(handle) };
    asked != 0 && code == STILL_ACTIVE as u32
}
