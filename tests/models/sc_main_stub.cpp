// SPDX-License-Identifier: GPL-2.0-only
// libsystemc refers to sc_main (its own main() calls it); Catch2 provides main() here and the
// model tests never elaborate a simulation. With the sanitizers, gcc keeps libsystemc linked
// (--no-as-needed) and the loader needs the symbol.
extern "C" int sc_main(int, char*[]) { return 0; }  // as declared in sysc/kernel/sc_externs.h
