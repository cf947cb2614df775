/*
 * A stand-in for Windows' bcryptprimitives.dll, for running Rust programs under Wine.
 *
 * Rust's std (1.78 and later) takes its random bytes from ProcessPrng in
 * bcryptprimitives.dll. Debian's Wine 8 has no such DLL, so without this file
 * every Rust program fails to load (STATUS_DLL_NOT_FOUND, c0000135). Wine does
 * have RtlGenRandom (exported by advapi32 as SystemFunction036), which fills a
 * buffer from the host's random source: ProcessPrng is that, in chunks.
 *
 * Built by `cargo xtask wine` with
 *   x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c -ladvapi32
 * and installed in the Wine prefix's system32. Test infrastructure only: it
 * never ships with childwire.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        /* RtlGenRandom takes a ULONG length; ProcessPrng a SIZE_T. */
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
