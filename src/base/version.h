/* version.h: memreport's version, written here only: `--version`, the reports that say what
 * made them (the JSON key "memreport", the Markdown's first lines) and the packages (the
 * Makefile reads this line) all take it from here. */
#ifndef MR_VERSION_H
#define MR_VERSION_H

#define MEMREPORT_VERSION "0.1.0"

#endif
