// Package schedulerhost runs cron jobs for one term of leadership.
package schedulerhost
