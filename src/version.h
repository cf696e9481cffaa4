/* version.h — tsopt's version, printed by --version and written into every generated header's banner. */
#ifndef TS_VERSION_H
#define TS_VERSION_H
#define TS_VERSION "0.1.0"
#endif
