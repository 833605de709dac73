#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
int main(void){return 0;}
