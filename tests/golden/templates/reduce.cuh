// stub of templates/reduce.cuh for the emitter golden test: the emitter copies it verbatim
#pragma once
#include "tile.cuh"
