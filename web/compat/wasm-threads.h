/* Included first (-include) in every source of the threaded WebAssembly
 * build, whisperknot-threads.wasm (web/meson.build).
 *
 * wasi-libc as Debian ships it is built without atomics and so without
 * thread-local storage: its errno is a plain global. <__errno.h> declares
 * it _Thread_local, which clang 14 refuses to compile for wasm32-wasi with
 * atomics on, so the engine reaches the same global under another name.
 * The threads the module starts run kernel jobs only (wk_pool), which set
 * no errno. */
#ifndef WK_COMPAT_WASM_THREADS_H
#define WK_COMPAT_WASM_THREADS_H

#define __wasilibc___errno_h
extern int wk_libc_errno __asm__ ("errno");
#define errno wk_libc_errno

#endif
