// Whether this build's writers can upload s3:// archives (libcurl is there):
// MODELZIP_CAN_UPLOAD is 1 where src/remote/meson.build defines it, 0 in
// builds without libcurl (the feature `remote` off, or a build of the
// sources outside meson such as the accelerator machine's). Included only
// where that is decided: remote/url.cpp, checkpoint/writer_s3.cpp,
// dist/s3_commit.cpp.
#pragma once

#ifndef MODELZIP_CAN_UPLOAD
#define MODELZIP_CAN_UPLOAD 0
#endif
