// Umbrella header: the whole public API of modelzip.
#pragma once

#include "modelzip/archive.hpp"
#include "modelzip/background_save.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/communicator.hpp"
#include "modelzip/distributed.hpp"
#include "modelzip/dtype.hpp"
#include "modelzip/error.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/metadata.hpp"
#include "modelzip/quantization.hpp"
#include "modelzip/quantize.hpp"
#include "modelzip/tensor.hpp"
#include "modelzip/writer.hpp"
