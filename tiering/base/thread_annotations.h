// Clang's thread-safety annotations: which mutex guards a field, which a
// function needs held, and the order two mutexes are taken in. clang checks
// them at compile time (-Wthread-safety; the order with -Wthread-safety-beta:
// tools/check-thread-safety runs both over the build); on GCC they expand to
// nothing. The mutex types they apply to are in mutex.h.
#pragma once

#if defined(__clang__)
#define TIERFS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TIERFS_THREAD_ANNOTATION(x)
#endif

// On a class: it is a capability (a mutex) named `x` in the warnings.
#define CAPABILITY(x) TIERFS_THREAD_ANNOTATION(capability(x))
// On a class: an RAII object that holds a capability while it lives.
#define SCOPED_CAPABILITY TIERFS_THREAD_ANNOTATION(scoped_lockable)

// On a field: read or written only with `x` held (shared suffices to read).
#define GUARDED_BY(x) TIERFS_THREAD_ANNOTATION(guarded_by(x))
// On a pointer field: what it points to is read or written only with `x` held.
#define PT_GUARDED_BY(x) TIERFS_THREAD_ANNOTATION(pt_guarded_by(x))

// On a mutex: the order it is taken in beside others (a mutex on the left
// may be held when one on its right is taken). Checked by
// -Wthread-safety-beta, and against docs/ARCHITECTURE.md's lock table by
// test/structure/check_architecture.py.
#define ACQUIRED_BEFORE(...) TIERFS_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) TIERFS_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))

// On a function: the caller holds the capabilities (exclusive; shared).
#define REQUIRES(...) TIERFS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) TIERFS_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))

// On a function: it takes or releases the capabilities and returns so.
#define ACQUIRE(...) TIERFS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) TIERFS_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) TIERFS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) TIERFS_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) TIERFS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))

// On a function: the caller must not hold the capabilities (it takes them).
#define EXCLUDES(...) TIERFS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

// On a function: it returns a reference to the capability `x`.
#define RETURN_CAPABILITY(x) TIERFS_THREAD_ANNOTATION(lock_returned(x))

// On a function: the analysis trusts it holds what it says (the mutex
// primitives themselves). Not for working around a warning in other code.
#define NO_THREAD_SAFETY_ANALYSIS TIERFS_THREAD_ANNOTATION(no_thread_safety_analysis)
