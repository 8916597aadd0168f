// Header-only: SwiftPM needs one source file per C target.
#include "CPrefetch.h"
