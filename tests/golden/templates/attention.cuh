// stub of templates/attention.cuh for the emitter golden test: the emitter copies it verbatim
#pragma once
#include "tile.cuh"
