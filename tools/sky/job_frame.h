/* sky job frame (job_frame.c), called by cmd_job.c. */
#ifndef SKY_JOB_FRAME_H
#define SKY_JOB_FRAME_H

/* Writes one crafted tensor frame to a file (integration tests). Returns
 * the exit code: 0, 1 (cannot build or write it), 2 (bad options). */
int sky_job_frame(int argc, char **argv);

#endif
