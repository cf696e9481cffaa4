// stub of templates/span.cuh for the emitter golden test: the emitter copies it verbatim
#pragma once
#include "tile.cuh"
