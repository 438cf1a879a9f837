// AddressSanitizer's defaults for the test binary (read only when it is built with
// -fsanitize=address: EPIGEMM_SANITIZE, scripts/sanitize.sh). allocator_may_return_null=1 makes a
// failed allocation return NULL, as the C library's does, instead of ending the process: the
// library reports OUT_OF_MEMORY for scratch it cannot get, and a test checks that it does (and
// writes nothing then). Nothing is suppressed.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EPIGEMM_TESTS_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EPIGEMM_TESTS_UNDER_ASAN 1
#endif

#ifdef EPIGEMM_TESTS_UNDER_ASAN
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif
