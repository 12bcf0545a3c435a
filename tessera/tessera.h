#pragma once

// Everything a Tessera user needs: #include "tessera/tessera.h".

#include "tessera/autograd/engine.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/allocator.h"
#include "tessera/core/dtype.h"
#include "tessera/core/rng.h"
#include "tessera/core/tensor.h"
#include "tessera/core/thread_pool.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/conv.h"
#include "tessera/ops/dropout.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/matmul.h"
#include "tessera/ops/pool.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/view.h"
