/* sky job watch / sky job collect (job_follow.c), called by cmd_job.c. */
#ifndef SKY_JOB_FOLLOW_H
#define SKY_JOB_FOLLOW_H

int sky_job_watch(int argc, char **argv);
int sky_job_collect(int argc, char **argv);

#endif
