// Rows of C per step of bs_cxx.cc (a local header: the build key follows it through the compiler's -MMD list).
#pragma once
constexpr long kRowsPerStep = 2;
