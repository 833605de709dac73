/*
 * defaults.c: the sanitizers' options for every program of a -DRH_SANITIZE build, so that a test
 * run by ctest, by mpirun or by hand behaves the same: a finding ends the program with an error,
 * and LeakSanitizer reads the libraries' suppressions (lsan.supp beside this file).  Options in
 * ASAN_OPTIONS, LSAN_OPTIONS or UBSAN_OPTIONS still take precedence.
 */
const char *__asan_default_options(void);
const char *__lsan_default_options(void);
const char *__ubsan_default_options(void);

const char *__asan_default_options(void) { return "detect_leaks=1:detect_stack_use_after_return=0"; }
const char *__lsan_default_options(void) { return "suppressions=" RH_LSAN_SUPPRESSIONS; }
const char *__ubsan_default_options(void) { return "print_stacktrace=1:halt_on_error=1"; }
