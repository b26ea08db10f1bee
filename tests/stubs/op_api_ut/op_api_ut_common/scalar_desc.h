// opgen's stand-in for the op_api UT framework (see tensor_desc.h): the emitted UTs pass attributes as plain
// C++ values, so no scalar descriptor is needed here.
#pragma once
