// Umbrella header: the core API of modelzip (Archive, Writer, NewTag,
// Tensor, Bytes, DType, Error, Limits, Metadata, progress, quantization,
// remote options, cancellation, background saves, version()), tensor quantization
// (modelzip/quantize.hpp) and the collective writer with its Communicator
// (modelzip/dist/). The other optional parts have their own headers:
// modelzip/convert.hpp (tensor files: npy, npz, safetensors, btf),
// modelzip/finalfusion/ (embeddings), modelzip/graph/ (graphs, training
// configurations, whole checkpoints) and modelzip/dist/mpi.hpp (the MPI
// backend, header-only).
#pragma once

#include "modelzip/archive.hpp"
#include "modelzip/background_save.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/dist/background_save.hpp"
#include "modelzip/dist/communicator.hpp"
#include "modelzip/dist/distributed.hpp"
#include "modelzip/dtype.hpp"
#include "modelzip/entry_stream.hpp"
#include "modelzip/error.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/metadata.hpp"
#include "modelzip/progress.hpp"
#include "modelzip/quantization.hpp"
#include "modelzip/quantize.hpp"
#include "modelzip/remote.hpp"
#include "modelzip/tag_metadata.hpp"
#include "modelzip/tensor.hpp"
#include "modelzip/version.hpp"
#include "modelzip/writer.hpp"
