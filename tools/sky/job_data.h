/* sky job data (job_data.c), called by cmd_job.c. */
#ifndef SKY_JOB_DATA_H
#define SKY_JOB_DATA_H

/* sky job data: prints a training micro-batch's token ids and labels as
 * hex, the bytes a data owner must never publish (integration tests). */
int sky_job_data(int argc, char **argv);

#endif
