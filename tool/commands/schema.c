/*
 * schema.c: `rehearsal schema`: the scenario reference, every key a scenario may hold with its
 * type, default, accepted values and what it does, written from the parser's own table
 * (scenario/reference.c).  docs/scenario-reference.md is its output.
 */
#include "cli.h"
#include "commands.h"

#include <stdio.h>

static const char usage_text[] =
    "usage: rehearsal schema\n"
    "Prints the scenario reference as Markdown: every key a scenario file may hold, its type,\n"
    "default, accepted values and what it does, from the table the parser walks (the page\n"
    "docs/scenario-reference.md is this output).\n"
    "      --help, --version\n"
    "Exit status: 0 printed, 1 stdout could not be written, 2 bad usage.\n";

static int no_option(int c, const char *value, void *arg) {
  (void)c, (void)value, (void)arg;
  return 2;
}

int rh_cmd_schema(int argc, char **argv) {
  static const struct option longopts[] = {{"help", no_argument, NULL, RH_OPT_HELP},
                                           {"version", no_argument, NULL, RH_OPT_VERSION},
                                           {NULL, 0, NULL, 0}};
  int first = argc;
  int rc = rh_cli_parse("schema", usage_text, argc, argv, "", longopts, no_option, NULL, NULL,
                        &first);
  if (rc >= 0) return rc;
  if (first < argc) return rh_cli_error("schema", "takes no arguments (got '%s')", argv[first]);
  if (rh_scenario_reference(stdout) != 0 || fflush(stdout) != 0) {
    perror("rehearsal schema: stdout");
    return 1;
  }
  return 0;
}
