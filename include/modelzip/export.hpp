// MODELZIP_API marks the declarations libmodelzip exports: the public
// classes and functions of include/modelzip/. The library is compiled with
// hidden visibility, so everything else (the internal namespaces, the
// engines it is built on) stays inside the shared library.
#pragma once

#if defined(_WIN32)
#define MODELZIP_API
#else
#define MODELZIP_API __attribute__((visibility("default")))
#endif
