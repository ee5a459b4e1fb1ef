// Failures the ranks agree on: a collective that tells every rank whether any rank failed,
// so that a failure all ranks reach together (a bad checkpoint, missing data, a non-finite
// loss) stops the job cleanly with one message and exit code 1, instead of one MPI_Abort
// banner per rank. A failure only one rank sees, where the others cannot join a collective,
// still goes through fatal() (MPI_Abort).
#pragma once

#include "core/status.h"
#include "parallel/process_group.h"

namespace mindspeed {

/// Collective over `group`. OK when no rank failed. Otherwise every rank returns kAborted;
/// the reporting rank -- the lowest whose failure is its own (not itself a kAborted echo of
/// another rank's) -- carries its failure's text as the message, the others an empty one.
Status agree_on_failure(ProcessGroup& group, const Status& local);

}  // namespace mindspeed
