/* sky job watch --federated and sky job collect --out-dir: a federated
 * job's rounds and its final model (job_fed.c). */
#ifndef SKY_JOB_FED_H
#define SKY_JOB_FED_H

/* 1 when the command line asks for the federated form (--federated or
 * --out-dir). */
int sky_job_fed_wanted(int argc, char **argv);
int sky_job_fed_watch(int argc, char **argv);
int sky_job_fed_collect(int argc, char **argv);

#endif
