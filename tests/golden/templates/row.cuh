// stub of templates/row.cuh for the emitter golden test: the emitter copies it verbatim
#pragma once
#include "tile.cuh"
