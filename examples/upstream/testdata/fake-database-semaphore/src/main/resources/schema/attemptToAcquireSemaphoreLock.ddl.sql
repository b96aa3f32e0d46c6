CREATE PROCEDURE attemptToAcquireSemaphoreLock(IN lockKey VARCHAR(255), IN timeoutSec INT, IN maxLockCount INT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    DECLARE slot INT DEFAULT NULL;
    DECLARE issued VARCHAR(64) DEFAULT NULL;
    CALL bootstrapLockKeyRows(lockKey, maxLockCount);
    START TRANSACTION;
    /* the lowest slot that is free or whose lease is over, by the database's clock */
    SELECT LOCK_NUM INTO slot FROM SEMAPHORE_LOCK
        WHERE LOCK_KEY = lockKey AND LOCK_NUM < maxLockCount
          AND (TOKEN IS NULL OR EXPIRES_ON <= UTC_TIMESTAMP(6))
        ORDER BY LOCK_NUM LIMIT 1 FOR UPDATE;
    IF slot IS NOT NULL THEN
        SET issued = UUID();
        UPDATE SEMAPHORE_LOCK SET TOKEN = issued, EXPIRES_ON = UTC_TIMESTAMP(6) + INTERVAL timeoutSec SECOND
            WHERE LOCK_KEY = lockKey AND LOCK_NUM = slot;
    END IF;
    COMMIT;
    SELECT issued AS TOKEN;
END
