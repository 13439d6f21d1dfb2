// Chunk 5, Metadata: the body is UTF-8 TOML text (length = chunk length).
#pragma once

#include "finalfusion/chunk_io.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::finalfusion::detail {

// Parses the whole body. Error(corrupt) with the line and the body offset
// on invalid TOML.
EmbeddingsMetadata read_metadata(modelzip::detail::ByteReader& body);
void write_metadata(Sink& sink, const EmbeddingsMetadata& metadata);

}  // namespace modelzip::finalfusion::detail
